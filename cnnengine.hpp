#pragma once
// The public face of cnnengine: include this one header, <cnnengine.hpp>, and link
// cnnengine::cnnengine. It includes every installed header (cmake/CnnPublicHeaders.cmake);
// docs/design.md is the map of what is behind them.
//
//   select_device        backends/device/device.hpp     the CPU or a GPU, and why
//   open_dataset, Loader data/dataset.hpp, loader.hpp   IDX, CIFAR and image folders, batched and staged
//   Network, layers::    engine/core/network.hpp,       a graph of layers: layers::conv2d(...) and the
//                        layers/builtin_layers.hpp      rest, or make_network for presets and files
//   Fit, fit             fit/fit.hpp                    a whole run: epochs, validation, best model, resume
//   Trainer              engine/train/trainer.hpp       plans memory under a budget, trains, evaluates
//   Predictor            engine/infer/predictor.hpp     inference on its own forward-only plan
//   MemoryStack          memory/memory_stack.hpp        the budget, its account, the statistics
//   save/read_checkpoint models/checkpoint.hpp          self-describing files, the whole state of a run
//   Model                models/model.hpp               a saved model loaded for inference
//   preprocess_image     data/dataset.hpp               an image file as the network takes it
//   export_onnx          models/onnx_export.hpp         the network as ONNX, for other runtimes
//   MpiSession           dist/mpi_session.hpp           data-parallel training over mpirun's ranks
//   register_layer_type  layers/registry.hpp            a layer of one's own, in network text and ONNX
//   cnn::Error           base/error.hpp                 every error a user can cause
#include "backends/device/device.hpp"
#include "base/batch.hpp"
#include "base/error.hpp"
#include "base/task.hpp"
#include "data/dataset.hpp"
#include "data/loader.hpp"
#include "dist/mpi_session.hpp"
#include "engine/core/backend.hpp"
#include "engine/core/communicator.hpp"
#include "engine/core/layer.hpp"
#include "engine/core/network.hpp"
#include "engine/core/parameter_store.hpp"
#include "engine/core/task_metrics.hpp"
#include "engine/core/task_scores.hpp"
#include "engine/core/tensor.hpp"
#include "engine/infer/predictor.hpp"
#include "engine/plan/memory_report.hpp"
#include "engine/train/loss_scale.hpp"
#include "engine/train/optimizer.hpp"
#include "engine/train/trainer.hpp"
#include "engine/train/training_diverged.hpp"
#include "fit/fit.hpp"
#include "fit/output_files.hpp"
#include "fit/output_kinds.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/registry.hpp"
#include "memory/memory_resource.hpp"
#include "memory/memory_stack.hpp"
#include "memory/out_of_memory.hpp"
#include "models/checkpoint.hpp"
#include "models/model.hpp"
#include "models/network_text.hpp"
#include "models/onnx_export.hpp"
