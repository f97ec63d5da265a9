# Work a run must not lose, and what it must not leave unsaid: another run's checkpoint is not
# replaced without --overwrite; a resumed run goes on writing its records; --evaluate reads the
# data the model trained on; a divergence says what --save holds; a missing --class-names file is
# an error. Included from tests/CMakeLists.txt, where add_run_check, scratch, short_run, FMNIST
# and the good_weights and bf16_weights fixtures are defined.
set(kept ${scratch}/kept_work)
file(REMOVE_RECURSE ${kept})
file(MAKE_DIRECTORY ${kept})
set(train $<TARGET_FILE:train_images>)

# A new run's --save over another run's checkpoint: refused, the file as it was.
add_test(NAME train_images_kept_another_runs_checkpoint COMMAND ${CMAKE_COMMAND} -E copy ${scratch}/good.ckpt ${kept}/other_run.ckpt)
set_tests_properties(train_images_kept_another_runs_checkpoint PROPERTIES FIXTURES_REQUIRED good_weights
  FIXTURES_SETUP kept_other_run)
add_run_check(train_images_kept_new_run_refuses_another_runs_checkpoint -DCOMMAND=${short_run}|--save|${kept}/other_run.ckpt
  -DEXPECT_RC=2 "-DEXPECT_OUTPUT=error: --save .*other_run.ckpt: it holds another run's checkpoint: --resume .*other_run.ckpt continues that run; give --overwrite"
  "-DREJECT_OUTPUT=epoch 1/1" -DUNCHANGED=${kept}/other_run.ckpt)
set_tests_properties(train_images_kept_new_run_refuses_another_runs_checkpoint PROPERTIES FIXTURES_REQUIRED kept_other_run)
add_run_check(train_images_kept_resumed_run_refuses_another_runs_checkpoint
  -DCOMMAND=${train}|--resume|${scratch}/good.ckpt|--epochs|2|--quiet|--save|${kept}/other_run.ckpt
  -DEXPECT_RC=2 "-DEXPECT_OUTPUT=error: --save .*other_run.ckpt: it holds another run's checkpoint"
  -DUNCHANGED=${kept}/other_run.ckpt)
set_tests_properties(train_images_kept_resumed_run_refuses_another_runs_checkpoint PROPERTIES
  FIXTURES_REQUIRED "kept_other_run;good_weights")

# A resumed run keeps writing its records where the run wrote them: the CSV gains epoch 2.
set(records_run ${short_run}|--overwrite|--save|${kept}/records.ckpt|--metrics-out|${kept}/records.jsonl|--csv|${kept}/records.csv)
add_run_check(train_images_kept_records_first_epoch -DCOMMAND=${records_run} -DEXPECT_RC=0 "-DEXPECT_OUTPUT=done:")
set_tests_properties(train_images_kept_records_first_epoch PROPERTIES FIXTURES_SETUP kept_records)
add_run_check(train_images_kept_records_on_resume
  -DCOMMAND=${train}|--resume|${kept}/records.ckpt|--epochs|2|--quiet|--threads|2
  -DEXPECT_RC=0 "-DEXPECT_OUTPUT=the run's records go on where they are: --metrics-out .*records.jsonl, --csv .*records.csv.*epoch 2/2"
  -DFILE=${kept}/records.csv "-DFILE_MATCHES=\n1,[^\n]*\n2,")
set_tests_properties(train_images_kept_records_on_resume PROPERTIES FIXTURES_REQUIRED kept_records)

# --evaluate without --data reads the data the run trained on, and --limit-eval cuts it.
add_run_check(train_images_kept_evaluate_reads_the_runs_data
  -DCOMMAND=${train}|--load|${scratch}/good.ckpt|--evaluate|--limit-eval|50|--threads|2
  -DEXPECT_RC=0 "-DEXPECT_OUTPUT=evaluating on the data .*good.ckpt trained on, ${FMNIST}.*over 50 samples")
set_tests_properties(train_images_kept_evaluate_reads_the_runs_data PROPERTIES FIXTURES_REQUIRED good_weights)

# A --class-names file that is not there is an error, not numbered classes.
add_run_check(train_images_kept_class_names_missing -DCOMMAND=${short_run}|--class-names|${kept}/no_such_names.txt
  -DEXPECT_RC=1 "-DEXPECT_OUTPUT=error: --class-names: .*no_such_names.txt: does not exist" "-DREJECT_OUTPUT=epoch 1/1")

# A divergence at the first step blames the data, not the rate; one after a save says the file
# holds that save (not the state before the run).
add_run_check(train_images_kept_diverged_at_the_first_step -DCOMMAND=${short_run}|--mean|0|--std|1e-38
  -DEXPECT_RC=1 "-DEXPECT_OUTPUT=training diverged at step 1: .*before any update: not the learning rate"
  "-DREJECT_OUTPUT=smaller learning rate")
add_run_check(train_images_kept_diverged_after_its_own_save
  -DCOMMAND=${train}|--data|${FMNIST}|--epochs|1|--limit|640|--batch|16|--quiet|--threads|2|--lr|1e5|--save-every|2|--save|${kept}/diverged.ckpt|--overwrite
  -DEXPECT_RC=1 "-DEXPECT_OUTPUT=training diverged at step [0-9]+: .*diverged.ckpt holds the run as it was at step 2, its last save")

# A checkpoint of a network with BatchNorm exports (its running statistics are its own).
if(CNN_HAVE_ONNX)
  add_run_check(train_images_kept_batchnorm_checkpoint_exports
    -DCOMMAND=${train}|--load|${scratch}/bf16.ckpt|--export-onnx|${kept}/small_bn.onnx|--overwrite
    -DEXPECT_RC=0 "-DEXPECT_OUTPUT=exported .*bf16.ckpt to .*small_bn.onnx")
  set_tests_properties(train_images_kept_batchnorm_checkpoint_exports PROPERTIES FIXTURES_REQUIRED bf16_weights)
endif()
