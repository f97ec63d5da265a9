# The headers an application may include: installed under include/cnnengine/, and the only ones
# examples/ may include (tests/layering/check_includes.cmake). Every other header stays in the
# tree: the allocator research kit (adaptors, strategies, traces' replay), the planner's and the
# runners' internals, the backends' kernels. A header here includes only headers here (the test
# installed_headers_standalone compiles each installed one on its own).
set(CNN_PUBLIC_HEADERS
  cnnengine.hpp
  # errors, a batch, files and names
  base/error.hpp base/batch.hpp base/rank_share.hpp base/atomic_file.hpp base/regular_file.hpp base/utf8.hpp
  # the budget, its account and its refusals
  memory/bytes.hpp memory/category.hpp memory/memory_resource.hpp memory/out_of_memory.hpp memory/buffer.hpp
  memory/statistics.hpp memory/strategy.hpp memory/budget_account.hpp memory/memory_stack.hpp memory/trace.hpp
  # data sets and the loader
  data/dataset.hpp data/data_error.hpp data/open_dataset.hpp data/loader.hpp data/preprocessing.hpp
  data/cifar_dataset.hpp data/cifar_folder.hpp data/image_folder_dataset.hpp
  # the engine: what a network is, the backend contract (dropout's counter RNG is part of it)
  engine/core/shape.hpp engine/core/tensor.hpp engine/core/backend.hpp engine/core/forwarding_backend.hpp
  engine/core/counter_rng.hpp engine/core/communicator.hpp engine/core/layer.hpp engine/core/network.hpp
  engine/core/parameter_store.hpp engine/core/evaluation.hpp engine/core/next_batch.hpp
  # planning before step 1, training, inference
  engine/plan/recompute_policy.hpp engine/plan/memory_report.hpp engine/plan/budget_too_small.hpp
  engine/plan/batch_planner.hpp
  engine/train/optimizer.hpp engine/train/trainer.hpp
  engine/infer/inference_planner.hpp engine/infer/predictor.hpp
  # the layers, and the registry a layer of one's own joins
  layers/add.hpp layers/batchnorm2d.hpp layers/conv2d.hpp layers/dense.hpp layers/dropout.hpp layers/flatten.hpp
  layers/pool2d.hpp layers/relu.hpp layers/registry.hpp layers/layer_type.hpp layers/layer_line.hpp
  layers/onnx_nodes.hpp
  # devices, data-parallel runs
  backends/cpu/cpu_backend.hpp backends/device/device.hpp backends/device/cuda_api.hpp
  dist/launch.hpp dist/mpi_session.hpp
  # saved models
  models/checkpoint.hpp models/model.hpp models/network_text.hpp models/onnx_export.hpp models/presets.hpp
)
