# train_images against what an attacker (or an unlucky user) gives it: settings altered inside a
# checkpoint, sizes that do not read, data moved or replaced under a resumed run, names that are
# not UTF-8, hostile network texts, signals outside the training loop. Included from
# tests/CMakeLists.txt, which defines FMNIST, scratch, short_run and add_run_check.

# Settings read back from a checkpoint pass the command line's own checks (a --batch of 0 once
# ended --resume with SIGFPE; 2^40 wrapped to 0). Each case: NAME;SETTING;VALUE;EXPECTED.
set(altered_settings
    "batch_zero\;--batch\;0\;--batch: must be a positive integer, got '0'"
    "batch_wrapping_to_zero\;--batch\;1099511627776\;--batch: must be a positive integer of at most 2147483647"
    "negative_epochs\;--epochs\;-5\;--epochs: must be a positive integer, got '-5'"
    "huge_crop_padding\;--crop-padding\;100000\;--crop-padding: must be an integer from 0 to 64"
    "negative_early_stop\;--early-stop\;-1\;--early-stop: must be an integer from 0 to 1000000"
    "budget_unreadable\;--memory-budget\;10XB\;--memory-budget: cannot read '10XB' as a size"
    "optimizer_object\;--optimizer\;{}\;its setting --optimizer is {}, which no command line can give")
foreach(case IN LISTS altered_settings)
  list(GET case 0 name)
  list(GET case 1 setting)
  list(GET case 2 value)
  list(GET case 3 expected)
  add_test(NAME train_images_alter_a_checkpoints_setting_${name}
    COMMAND alter_checkpoint ${scratch}/good.ckpt ${scratch}/setting_${name}.ckpt /training/settings/options/${setting} ${value})
  set_tests_properties(train_images_alter_a_checkpoints_setting_${name} PROPERTIES FIXTURES_REQUIRED good_weights
    FIXTURES_SETUP setting_${name})
  add_run_check(train_images_resume_refuses_an_altered_setting_${name}
    -DCOMMAND=$<TARGET_FILE:train_images>|--resume|${scratch}/setting_${name}.ckpt|--save|${scratch}/setting_out.ckpt|--quiet
    -DEXPECT_RC=1 "-DEXPECT_OUTPUT=setting_${name}.ckpt: .*${expected}" "-DREJECT_OUTPUT=total trainable parameters"
    -DUNCHANGED=${scratch}/setting_${name}.ckpt)
  set_tests_properties(train_images_resume_refuses_an_altered_setting_${name} PROPERTIES FIXTURES_REQUIRED setting_${name})
endforeach()

# Sizes that do not read: a usage error (exit 2) naming the option, never an uncaught exception.
foreach(size 10XB 1EiB -5MiB nan inf 1e3MiB 0x100000 MiB)
  add_run_check(train_images_refuses_budget_${size} -DCOMMAND=${short_run}|--memory-budget|${size} -DEXPECT_RC=2
    "-DEXPECT_OUTPUT=--memory-budget: cannot read '${size}' as a size" "-DREJECT_OUTPUT=^data:")
endforeach()
add_run_check(train_images_refuses_max_image_bytes_10XB -DCOMMAND=${short_run}|--max-image-bytes|10XB -DEXPECT_RC=2
  "-DEXPECT_OUTPUT=--max-image-bytes: cannot read '10XB' as a size" "-DREJECT_OUTPUT=^data:")

# Without --memory-budget a run holds a budget of what the machine has, and says so.
add_run_check(train_images_default_budget_is_the_machines -DCOMMAND=${short_run}|--plan -DEXPECT_RC=0
  "-DEXPECT_OUTPUT=memory budget: [0-9.]+ [KMGT]iB, 90% of the [0-9.]+ [KMGT]iB this machine has available")
# ... and a resumed run may be given another.
add_run_check(train_images_resume_takes_another_budget
  -DCOMMAND=$<TARGET_FILE:train_images>|--resume|${scratch}/good.ckpt|--epochs|2|--memory-budget|64MiB|--plan
  -DEXPECT_RC=0 "-DEXPECT_OUTPUT=note: --memory-budget 64MiB instead of the run's own .none.*budget +64.00 MiB"
  -DUNCHANGED=${scratch}/good.ckpt)
set_tests_properties(train_images_resume_takes_another_budget PROPERTIES FIXTURES_REQUIRED good_weights)

# A checkpoint records what identifies its data: a run started with a relative --data resumes
# from another folder, and with the same data under another path, and refuses other data (the
# same image folder with one image's bytes changed: same names, same counts). Image folders of
# three images: these runs train, and train fast under the sanitizers too.
set(moved ${scratch}/moved_data)
file(REMOVE_RECURSE ${moved})
file(MAKE_DIRECTORY ${moved}/first/data ${moved}/elsewhere ${moved}/same_data ${moved}/other_data)
foreach(copy first/data same_data other_data)
  file(COPY ${CMAKE_CURRENT_SOURCE_DIR}/train_images/one_image_per_class/ DESTINATION ${moved}/${copy})
endforeach()
file(COPY_FILE ${CMAKE_CURRENT_SOURCE_DIR}/train_images/one_image_per_class/a/0.png ${moved}/other_data/b/0.png)
set(moved_steps
    "train\;${moved}/first\;--data|data|--epochs|1|--save|${moved}/run.ckpt|--overwrite\;0\;epoch 1/1"
    "resume_from_another_folder\;${moved}/elsewhere\;--resume|../run.ckpt|--epochs|2|--save|${moved}/run2.ckpt|--overwrite\;0\;epoch 2/2"
    "resume_with_the_data_elsewhere\;${moved}\;--resume|run.ckpt|--data|same_data|--epochs|2|--save|${moved}/run3.ckpt|--overwrite\;0\;epoch 2/2"
    "resume_refuses_other_data\;${moved}\;--resume|run.ckpt|--data|other_data|--epochs|2\;2\;--data .*other_data is not the data set the run trained on .*first/data.: the files' CRC-32: ")
set(previous "")
foreach(case IN LISTS moved_steps)
  list(GET case 0 name)
  list(GET case 1 folder)
  list(GET case 2 args)
  list(GET case 3 rc)
  list(GET case 4 expected)
  add_run_check(train_images_moved_data_${name}
    -DCOMMAND=${CMAKE_COMMAND}|-E|chdir|${folder}|$<TARGET_FILE:train_images>|${args}|--quiet|--threads|1
    -DEXPECT_RC=${rc} "-DEXPECT_OUTPUT=${expected}")
  if(previous)
    set_tests_properties(train_images_moved_data_${name} PROPERTIES FIXTURES_REQUIRED moved_data)
  else()
    set_tests_properties(train_images_moved_data_${name} PROPERTIES FIXTURES_SETUP moved_data)
  endif()
  set(previous ${name})
endforeach()

# Hostile network texts and model paths: refused before planning, naming the file and line.
file(WRITE ${scratch}/unused_output.txt "conv 8 3 pad=1\nrelu as=unused\nconv 8 3 pad=1 in=input\nflatten\ndense 10\n")
file(CREATE_LINK ${scratch}/no_such_network.txt ${scratch}/dangling_network.txt SYMBOLIC)
file(CREATE_LINK ${scratch}/network_loop_b.txt ${scratch}/network_loop_a.txt SYMBOLIC)
file(CREATE_LINK ${scratch}/network_loop_a.txt ${scratch}/network_loop_b.txt SYMBOLIC)
set(hostile_models
    "unused_output\;${scratch}/unused_output.txt\;unused_output.txt:2: the output of .* is never used"
    "dangling_link\;${scratch}/dangling_network.txt\;dangling_network.txt: it is a broken symbolic link"
    "link_loop\;${scratch}/network_loop_a.txt\;network_loop_a.txt: it cannot be examined: Too many levels of symbolic links")
foreach(case IN LISTS hostile_models)
  list(GET case 0 name)
  list(GET case 1 model)
  list(GET case 2 expected)
  add_run_check(train_images_refuses_model_${name} -DCOMMAND=${short_run}|--model|${model}|--plan -DEXPECT_RC=1
    "-DEXPECT_OUTPUT=${expected}" "-DREJECT_OUTPUT=total trainable parameters")
endforeach()
# A checkpoint's network of 100 001 layers (a few hundred KB of text): refused as it is read,
# before any planning (1M ReLUs once took 9.4 GB within 35 s); an input side of 2^32 + 1, read
# as what it is, not wrapped to 1 (tests/models/network_text_limits_test.cpp: the input's size).
string(REPEAT "relu\n" 100001 many_layers)
file(WRITE ${scratch}/many_layers.txt "flatten\n${many_layers}dense 10\n")
set(altered_models
    "many_layers\;/model/network\;@${scratch}/many_layers.txt\;--resume\;more than 100000 layers"
    "input_side_wrapping\;/model/input/1\;4294967297\;--resume\;corrupt .its input height is 4294967297, not a whole number")
foreach(case IN LISTS altered_models)
  list(GET case 0 name)
  list(GET case 1 pointer)
  list(GET case 2 value)
  list(GET case 3 how)
  list(GET case 4 expected)
  add_test(NAME train_images_alter_a_checkpoints_model_${name}
    COMMAND alter_checkpoint ${scratch}/good.ckpt ${scratch}/model_${name}.ckpt ${pointer} ${value})
  set_tests_properties(train_images_alter_a_checkpoints_model_${name} PROPERTIES FIXTURES_REQUIRED good_weights
    FIXTURES_SETUP model_${name})
  add_run_check(train_images_refuses_an_altered_model_${name}
    -DCOMMAND=$<TARGET_FILE:train_images>|${how}|${scratch}/model_${name}.ckpt|--data|${FMNIST}|--plan
    -DEXPECT_RC=1 "-DEXPECT_OUTPUT=${expected}" "-DREJECT_OUTPUT=total trainable parameters"
    -DUNCHANGED=${scratch}/model_${name}.ckpt)
  set_tests_properties(train_images_refuses_an_altered_model_${name} PROPERTIES FIXTURES_REQUIRED model_${name})
endforeach()

# An IDX file that is a FIFO or a folder is named as what it is, not as missing.
foreach(kind fifo folder)
  set(idx ${scratch}/idx_with_a_${kind})
  file(REMOVE_RECURSE ${idx})
  file(MAKE_DIRECTORY ${idx})
  foreach(file train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte)
    file(CREATE_LINK ${FMNIST}/${file}.gz ${idx}/${file}.gz SYMBOLIC)
  endforeach()
endforeach()
execute_process(COMMAND mkfifo ${scratch}/idx_with_a_fifo/t10k-labels-idx1-ubyte.gz ERROR_QUIET)
file(MAKE_DIRECTORY ${scratch}/idx_with_a_folder/t10k-labels-idx1-ubyte.gz)
add_run_check(train_images_idx_file_is_a_fifo
  -DCOMMAND=$<TARGET_FILE:train_images>|--data|${scratch}/idx_with_a_fifo|--plan -DEXPECT_RC=1
  "-DEXPECT_OUTPUT=t10k-labels-idx1-ubyte.gz: .*FIFO" "-DREJECT_OUTPUT=missing")
add_run_check(train_images_idx_file_is_a_folder
  -DCOMMAND=$<TARGET_FILE:train_images>|--data|${scratch}/idx_with_a_folder|--plan -DEXPECT_RC=1
  "-DEXPECT_OUTPUT=t10k-labels-idx1-ubyte.gz: .*folder" "-DREJECT_OUTPUT=missing")

# Names that are not UTF-8, and signals outside the training loop (scripts: bash builds the names
# and sends the signals).
add_test(NAME train_images_non_utf8_names
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train_images/check_non_utf8_names.sh $<TARGET_FILE:train_images>
    ${CMAKE_CURRENT_SOURCE_DIR}/train_images/one_image_per_class ${scratch}/non_utf8)
add_test(NAME train_images_signal_outside_the_loop_stops_at_once
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train_images/check_signal_outside_loop.sh
    $<TARGET_FILE:train_images_paused_before_training> ${FMNIST} ${scratch}/signal_outside_loop)
add_test(NAME train_images_signal_during_evaluation_stops_at_once
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train_images/check_signal_during_evaluation.sh $<TARGET_FILE:train_images>
    ${FMNIST} ${scratch}/signal_during_evaluation)

# Over several ranks, an error on a rank other than 0 (mpirun's MPMD form: its own command line) is
# printed, naming the rank.
if(CNN_HAVE_MPI AND MPIEXEC_EXECUTABLE)
  set(rank_args --data|${FMNIST}|--epochs|1|--limit|128|--threads|1|--quiet)
  add_run_check(data_parallel_names_an_error_on_rank_1
    "-DCOMMAND=${CMAKE_COMMAND}|-E|env|OMPI_ALLOW_RUN_AS_ROOT=1|OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1|${MPIEXEC_EXECUTABLE}|--oversubscribe|-np|1|$<TARGET_FILE:train_images>|${rank_args}|--batch|64|:|-np|1|$<TARGET_FILE:train_images>|${rank_args}|--batch|0"
    -DEXPECT_RC=2 "-DEXPECT_OUTPUT=rank 1: error: --batch: must be a positive integer, got '0'")
  set_tests_properties(data_parallel_names_an_error_on_rank_1 PROPERTIES LABELS mpi PROCESSORS 2)
endif()
