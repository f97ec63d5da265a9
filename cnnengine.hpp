#pragma once
// The public face of cnnengine: include this one header, <cnnengine/cnnengine.hpp>, and link
// cnnengine::cnnengine. It includes every installed header (cmake/CnnPublicHeaders.cmake) but the
// kernel contract; docs/design.md is the map of what is behind them.
//
//   select_device        backends/device/device.hpp     the CPU or a GPU, and why
//   open_dataset, Loader data/dataset.hpp, loader.hpp   IDX, CIFAR and image folders, batched and staged
//   PhotoAugmentation    data/augmentation.hpp          random resized crops, colour jitter, erasing
//   Network, layers::    engine/core/network.hpp,       a graph of layers: layers::conv2d(...) and the
//                        layers/builtin_layers.hpp      rest, or make_network for presets and files
//   Fit, fit             fit/fit.hpp                    a whole run: epochs, validation, best model, resume
//   Trainer              engine/train/trainer.hpp       plans memory under a budget, trains, evaluates
//   Predictor            engine/infer/predictor.hpp     inference on its own forward-only plan
//   MemoryStack          memory/memory_stack.hpp        the budget, its account, the statistics
//   save/read_checkpoint models/checkpoint.hpp          self-describing files, the whole state of a run
//   Model                models/model.hpp               a saved model loaded for inference
//   network_for_fine_tuning models/fine_tuning.hpp      a saved network with a new head for other classes
//   preprocess_image     data/dataset.hpp               an image file as the network takes it
//   export_onnx          models/onnx_export.hpp         the network as ONNX, for other runtimes
//   import_onnx          models/onnx_import.hpp         another engine's ONNX model, with its weights
//   MpiSession           dist/mpi_session.hpp           data-parallel training over mpirun's ranks
//   register_layer_type  layers/registry.hpp            a layer of one's own, in network text and ONNX
//   Backend's kernels    engine/core/backend.hpp        what a layer of one's own calls: not included
//                                                       here, where Backend is a name (backend_types.hpp)
//   cnn::Error           base/error.hpp                 every error a user can cause
#include <cnnengine/backends/device/device.hpp>
#include <cnnengine/base/batch.hpp>
#include <cnnengine/base/error.hpp>
#include <cnnengine/base/task.hpp>
#include <cnnengine/data/augmentation.hpp>
#include <cnnengine/data/dataset.hpp>
#include <cnnengine/data/loader.hpp>
#include <cnnengine/dist/mpi_session.hpp>
#include <cnnengine/engine/core/backend_types.hpp>
#include <cnnengine/engine/core/communicator.hpp>
#include <cnnengine/engine/core/layer.hpp>
#include <cnnengine/engine/core/network.hpp>
#include <cnnengine/engine/core/parameter_store.hpp>
#include <cnnengine/engine/core/task_metrics.hpp>
#include <cnnengine/engine/core/task_scores.hpp>
#include <cnnengine/engine/core/tensor.hpp>
#include <cnnengine/engine/infer/predictor.hpp>
#include <cnnengine/engine/plan/memory_report.hpp>
#include <cnnengine/engine/train/loss_scale.hpp>
#include <cnnengine/engine/train/optimizer.hpp>
#include <cnnengine/engine/train/trainer.hpp>
#include <cnnengine/engine/train/training_diverged.hpp>
#include <cnnengine/fit/fit.hpp>
#include <cnnengine/fit/output_files.hpp>
#include <cnnengine/fit/output_kinds.hpp>
#include <cnnengine/layers/builtin_layers.hpp>
#include <cnnengine/layers/registry.hpp>
#include <cnnengine/memory/memory_resource.hpp>
#include <cnnengine/memory/memory_stack.hpp>
#include <cnnengine/memory/out_of_memory.hpp>
#include <cnnengine/models/checkpoint.hpp>
#include <cnnengine/models/fine_tuning.hpp>
#include <cnnengine/models/model.hpp>
#include <cnnengine/models/network_text.hpp>
#include <cnnengine/models/onnx_export.hpp>
#include <cnnengine/models/onnx_import.hpp>
