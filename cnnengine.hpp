#pragma once
// The public face of cnnengine: include this one header, <cnnengine/cnnengine.hpp>, and link
// cnnengine::cnnengine. docs/design.md is the map of what is behind it.
//
//   select_device        backends/device/device.hpp   the CPU or a GPU, and why
//   open_dataset, Loader data/                        IDX, CIFAR and image folders, batched and staged
//   Network, layers      engine/network.hpp, layers/  a graph of layers; make_network for presets and files
//   Trainer              engine/trainer.hpp           plans memory under a budget, trains, evaluates
//   MemoryStack          memory/memory_stack.hpp      the budget, the statistics, the trace, the strategy
//   save/read_checkpoint models/checkpoint.hpp         self-describing files, the whole state of a run
//   Model                models/model.hpp              a saved model loaded for inference
//   preprocess_image     data/preprocessing.hpp        an image file as the network takes it
//   export_onnx          models/onnx_export.hpp        the network as ONNX, for other runtimes
//   MpiSession           dist/mpi_session.hpp          data-parallel training over mpirun's ranks
//   cnn::Error           base/error.hpp               every error a user can cause
#include "cnnengine/backends/cpu/cpu_backend.hpp"
#include "cnnengine/backends/device/device.hpp"
#include "cnnengine/base/error.hpp"
#include "cnnengine/base/utf8.hpp"
#include "cnnengine/data/cifar_folder.hpp"
#include "cnnengine/data/data_error.hpp"
#include "cnnengine/data/dataset.hpp"
#include "cnnengine/data/loader.hpp"
#include "cnnengine/data/open_dataset.hpp"
#include "cnnengine/data/preprocessing.hpp"
#include "cnnengine/dist/launch.hpp"
#include "cnnengine/dist/mpi_session.hpp"
#include "cnnengine/engine/backend.hpp"
#include "cnnengine/engine/batch_planner.hpp"
#include "cnnengine/engine/communicator.hpp"
#include "cnnengine/engine/memory_report.hpp"
#include "cnnengine/engine/network.hpp"
#include "cnnengine/engine/optimizer.hpp"
#include "cnnengine/engine/trainer.hpp"
#include "cnnengine/layers/add.hpp"
#include "cnnengine/layers/batchnorm2d.hpp"
#include "cnnengine/layers/conv2d.hpp"
#include "cnnengine/layers/dense.hpp"
#include "cnnengine/layers/dropout.hpp"
#include "cnnengine/layers/flatten.hpp"
#include "cnnengine/layers/pool2d.hpp"
#include "cnnengine/layers/relu.hpp"
#include "cnnengine/memory/bytes.hpp"
#include "cnnengine/memory/host_resource.hpp"
#include "cnnengine/memory/memory_stack.hpp"
#include "cnnengine/memory/out_of_memory.hpp"
#include "cnnengine/memory/statistics_adaptor.hpp"
#include "cnnengine/models/checkpoint.hpp"
#include "cnnengine/models/model.hpp"
#include "cnnengine/models/network_text.hpp"
#include "cnnengine/models/onnx_export.hpp"
#include "cnnengine/models/presets.hpp"
