#pragma once
// The public face of cnnengine: include this one header, <cnnengine.hpp>, and link
// cnnengine::cnnengine. docs/design.md is the map of what is behind it.
//
//   select_device        backends/device/device.hpp   the CPU or a GPU, and why
//   open_dataset, Loader data/                        IDX, CIFAR and image folders, batched and staged
//   Network, layers      engine/core/network.hpp, layers/  a graph of layers; make_network for presets and files
//   Trainer              engine/train/trainer.hpp           plans memory under a budget, trains, evaluates
//   Predictor            engine/infer/predictor.hpp         inference on its own forward-only plan
//   MemoryStack          memory/memory_stack.hpp      the budget, the statistics, the trace, the strategy
//   save/read_checkpoint models/checkpoint.hpp         self-describing files, the whole state of a run
//   Model                models/model.hpp              a saved model loaded for inference
//   preprocess_image     data/preprocessing.hpp        an image file as the network takes it
//   export_onnx          models/onnx_export.hpp        the network as ONNX, for other runtimes
//   MpiSession           dist/mpi_session.hpp          data-parallel training over mpirun's ranks
//   cnn::Error           base/error.hpp               every error a user can cause
#include "backends/cpu/cpu_backend.hpp"
#include "backends/device/device.hpp"
#include "base/error.hpp"
#include "base/utf8.hpp"
#include "data/cifar_folder.hpp"
#include "data/data_error.hpp"
#include "data/dataset.hpp"
#include "data/loader.hpp"
#include "data/open_dataset.hpp"
#include "data/preprocessing.hpp"
#include "dist/launch.hpp"
#include "dist/mpi_session.hpp"
#include "engine/core/backend.hpp"
#include "engine/plan/batch_planner.hpp"
#include "engine/core/communicator.hpp"
#include "engine/plan/memory_report.hpp"
#include "engine/core/network.hpp"
#include "engine/infer/predictor.hpp"
#include "engine/train/optimizer.hpp"
#include "engine/train/trainer.hpp"
#include "layers/add.hpp"
#include "layers/batchnorm2d.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/dropout.hpp"
#include "layers/flatten.hpp"
#include "layers/pool2d.hpp"
#include "layers/relu.hpp"
#include "memory/bytes.hpp"
#include "memory/memory_stack.hpp"
#include "memory/out_of_memory.hpp"
#include "models/checkpoint.hpp"
#include "models/model.hpp"
#include "models/network_text.hpp"
#include "models/onnx_export.hpp"
#include "models/presets.hpp"
