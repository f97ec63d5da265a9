# The headers an application may include: installed under include/cnnengine/, and the only ones
# examples/app may include (tests/layering/check_includes.cmake). Every other header stays in the
# tree: the layers' classes (an application takes them from layers/builtin_layers.hpp), the
# allocator research kit (adaptors, strategies, traces' replay), the planners, the runners'
# internals, the data sets' readers, the backends' kernels. A header here includes only headers
# here, through the prefix as installed (<cnnengine/base/error.hpp>; the test
# installed_headers_standalone compiles each installed one on its own against include/ alone).
set(CNN_PUBLIC_HEADERS
  cnnengine.hpp
  # errors, a batch and the tasks
  base/error.hpp base/batch.hpp base/task.hpp
  # memory: where bytes come from and what they are for, the budget and its refusals
  memory/memory_resource.hpp memory/memory_stack.hpp memory/out_of_memory.hpp
  # data sets and the loader
  data/dataset.hpp data/augmentation.hpp data/loader.hpp
  # the engine: tensors, the backend and communicator contracts, layers and networks, the parameters
  engine/core/tensor.hpp engine/core/backend_types.hpp engine/core/backend.hpp engine/core/communicator.hpp
  engine/core/layer.hpp
  engine/core/network.hpp engine/core/parameter_store.hpp engine/core/task_metrics.hpp engine/core/task_scores.hpp
  # training and inference, each planned under the budget before it runs
  engine/plan/memory_report.hpp engine/train/optimizer.hpp engine/train/loss_scale.hpp engine/train/trainer.hpp
  engine/train/training_diverged.hpp
  engine/infer/predictor.hpp
  # the built-in layers, and the registry a layer of one's own joins
  layers/builtin_layers.hpp layers/registry.hpp
  # devices, data-parallel runs
  backends/device/device.hpp dist/mpi_session.hpp
  # saved models
  models/checkpoint.hpp models/fine_tuning.hpp models/model.hpp models/network_text.hpp models/onnx_export.hpp models/onnx_import.hpp
  # a whole run: epochs, validation, model selection, checkpoints, logs; what a run may write
  fit/fit.hpp fit/output_files.hpp fit/output_kinds.hpp
)

# train_images is the engine's own command line, built in the tree: beyond the public headers it
# reaches the planners (its --plan), the files that are never left half-written and names that are
# not UTF-8, the regular-file check, the memory trace. Nothing else in examples/ may.
set(CNN_TRAIN_IMAGES_HEADERS
  base/atomic_file.hpp base/regular_file.hpp base/utf8.hpp memory/trace.hpp
  engine/train/planning_options.hpp engine/infer/inference_planner.hpp fit/metrics_file.hpp
)

# Installed, but left out of the facade (cnnengine.hpp): the kernel contract, which only a layer of
# one's own calls; a program that trains or predicts names a backend without it
# (engine/core/backend_types.hpp).
set(CNN_FACADE_LEAVES_OUT engine/core/backend.hpp)
