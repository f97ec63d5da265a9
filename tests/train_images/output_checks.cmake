# Every output of every train_images command is checked before any work (output_paths.hpp), and
# written whole or not at all. Included from tests/CMakeLists.txt, where add_run_check, scratch,
# short_run and the good_weights fixture are defined.
set(out ${scratch}/output_checks)
file(MAKE_DIRECTORY ${out}/a_folder ${out}/predict_folder)
file(WRITE ${out}/notes.txt "not what any output writes\n")
file(COPY ${CMAKE_CURRENT_SOURCE_DIR}/train_images/predict_images/fashion_0.png DESTINATION ${out})
file(COPY ${CMAKE_CURRENT_SOURCE_DIR}/train_images/predict_images/fashion_0.png DESTINATION ${out}/predict_folder)
file(COPY ${CMAKE_CURRENT_SOURCE_DIR}/train_images/one_image_per_class/ DESTINATION ${out}/images)
file(COPY_FILE ${out}/fashion_0.png ${out}/previous_plot.png)
execute_process(COMMAND mkfifo ${out}/a_fifo ERROR_QUIET)
file(CREATE_LINK ${out}/notes.txt ${out}/link_to_notes.png SYMBOLIC)
file(REMOVE ${out}/plot_target.png)
file(CREATE_LINK ${out}/plot_target.png ${out}/link_to_a_new_plot.png SYMBOLIC)
set(train $<TARGET_FILE:train_images>)
set(good ${scratch}/good.ckpt)
set(image ${out}/fashion_0.png)
set(no_partial "-DNO_GLOB=${out}/.cnnengine-*.partial")

# Refused before any work: exit 2, a message naming the output, nothing trained, the file there
# unchanged ('-': none to check). Those of --load read train_images_save_good_weights' checkpoint.
function(refused name expected unchanged)  # the command's words follow
  string(REPLACE ";" "|" command "${ARGN}")
  set(keep "")
  if(NOT unchanged STREQUAL "-")
    set(keep -DUNCHANGED=${unchanged})
  endif()
  add_run_check(train_images_outputs_refuse_${name} -DCOMMAND=${command} -DEXPECT_RC=2
    "-DEXPECT_OUTPUT=error: ${expected}"
    "-DREJECT_OUTPUT=epoch 1/1|test loss|exported|most likely" ${keep} ${no_partial})
  set_tests_properties(train_images_outputs_refuse_${name} PROPERTIES FIXTURES_REQUIRED good_weights)
endfunction()
refused(plot_to_a_device "--plot /dev/null: it is a device" - ${short_run} --plot /dev/null)
refused(export_onnx_to_a_device "--export-onnx /dev/null: it is a device" - ${short_run} --export-onnx /dev/null)
refused(save_to_a_device "--save /dev/null: it is a device" - ${short_run} --save /dev/null)
refused(plot_to_a_folder "--plot .*a_folder: it is a folder" - ${short_run} --plot ${out}/a_folder)
refused(plot_over_a_foreign_file "--plot .*notes.txt: it exists and is not a PNG .give --overwrite" ${out}/notes.txt
  ${short_run} --plot ${out}/notes.txt)
refused(plot_through_a_link_to_a_foreign_file "--plot .*link_to_notes.png: it exists and is not a PNG" ${out}/notes.txt
  ${short_run} --plot ${out}/link_to_notes.png)
refused(metrics_over_a_foreign_file "--metrics-out .*notes.txt: it exists and is not a metrics file" ${out}/notes.txt
  ${short_run} --metrics-out ${out}/notes.txt)
refused(trace_over_a_foreign_file "--trace .*notes.txt: it exists and is not a cnnengine memory trace" ${out}/notes.txt
  ${short_run} --trace ${out}/notes.txt)
refused(export_onnx_over_a_foreign_file "--export-onnx .*notes.txt: it exists and is not an ONNX model" ${out}/notes.txt
  ${short_run} --export-onnx ${out}/notes.txt)
refused(export_onnx_into_a_missing_folder "--export-onnx .*model.onnx: the folder .*missing does not exist" -
  ${short_run} --export-onnx ${out}/missing/model.onnx)
refused(plot_into_a_folder_that_takes_no_file "--plot /proc/curves.png: cannot create a file in /proc" -
  ${short_run} --plot /proc/curves.png)
refused(plot_and_metrics_one_file "--plot and --metrics-out name the same file" -
  ${short_run} --plot ${out}/both --metrics-out ${out}/both)
refused(plot_inside_the_image_folder "--plot .*curves.png is inside the image folder --data" -
  ${train} --data ${out}/images --epochs 1 --quiet --plot ${out}/images/a/curves.png)
refused(tensorboard_in_the_data_folder "--tensorboard .*images is the image folder --data .*: what it writes there would be read as input" -
  ${train} --data ${out}/images --epochs 1 --quiet --tensorboard ${out}/images)
refused(tensorboard_inside_the_data_folder "--tensorboard .*images/logs is inside the image folder --data" -
  ${train} --data ${out}/images --epochs 1 --quiet --tensorboard ${out}/images/logs)
refused(tensorboard_inside_an_idx_folder "--tensorboard .*logs is inside the data folder --data" -
  ${short_run} --tensorboard ${FMNIST}/logs)
refused(tensorboard_over_a_file "--tensorboard .*notes.txt: it exists and is not a folder" ${out}/notes.txt
  ${short_run} --tensorboard ${out}/notes.txt)
refused(save_inside_an_idx_folder "--save .*run.ckpt is inside the data folder --data" -
  ${short_run} --save ${FMNIST}/run.ckpt)
refused(train_metrics_over_the_loaded_checkpoint "--metrics-out .*would overwrite --load" ${good}
  ${short_run} --load ${good} --metrics-out ${good})
refused(predict_metrics_over_the_loaded_checkpoint "--metrics-out .*would overwrite --load" ${good}
  ${train} --load ${good} --predict ${image} --metrics-out ${good})
refused(predict_metrics_over_the_predicted_image "--metrics-out .*would overwrite --predict" ${image}
  ${train} --load ${good} --predict ${image} --metrics-out ${image})
refused(predict_metrics_inside_a_predicted_folder "--metrics-out .*m.jsonl is inside --predict" -
  ${train} --load ${good} --predict ${out}/predict_folder --metrics-out ${out}/predict_folder/m.jsonl)
refused(predict_metrics_to_a_fifo "--metrics-out .*a_fifo: it is a FIFO .* forever if none comes" -
  ${train} --load ${good} --predict ${image} --metrics-out ${out}/a_fifo)
refused(predict_metrics_over_a_foreign_file "--metrics-out .*notes.txt: it exists and is not a metrics file"
  ${out}/notes.txt
  ${train} --load ${good} --predict ${image} --metrics-out ${out}/notes.txt)
set(data_file ${FMNIST}/t10k-labels-idx1-ubyte.gz)
refused(evaluate_metrics_over_a_data_file "--metrics-out .*would overwrite a data file" ${data_file}
  ${train} --load ${good} --evaluate --data ${FMNIST} --metrics-out ${data_file})
refused(evaluate_metrics_inside_the_image_folder "--metrics-out .*m.jsonl is inside the image folder --data" -
  ${train} --load ${good} --evaluate --data ${out}/images --metrics-out ${out}/images/b/m.jsonl)
refused(export_over_the_loaded_checkpoint "--export-onnx .*would overwrite --load" ${good}
  ${train} --load ${good} --export-onnx ${good})
refused(export_to_a_fifo "--export-onnx .*a_fifo: it is a FIFO .named pipe.: it would be replaced by a file" -
  ${train} --load ${good} --export-onnx ${out}/a_fifo)
refused(export_over_a_foreign_file "--export-onnx .*notes.txt: it exists and is not an ONNX model" ${out}/notes.txt
  ${train} --load ${good} --export-onnx ${out}/notes.txt)

# Allowed: two streams to /dev/null; a stream to our standard output, a pipe; --overwrite over a
# foreign file; a link to a plot not yet there, written through (the link keeps naming the file).
add_run_check(train_images_outputs_streams_share_dev_null
  -DCOMMAND=${short_run}|--metrics-out|/dev/null|--trace|/dev/null
  -DEXPECT_RC=0 "-DEXPECT_OUTPUT=done: test accuracy")
# (check_run reads the command's standard output through a pipe: /dev/stdout is one with a reader)
add_run_check(train_images_outputs_metrics_to_our_piped_stdout
  -DCOMMAND=${train}|--load|${scratch}/good.ckpt|--predict|${image}|--metrics-out|/dev/stdout
  -DEXPECT_RC=0 "-DEXPECT_OUTPUT={\"file\":\"[^\"]*fashion_0.png\",\"top\"")
set_tests_properties(train_images_outputs_metrics_to_our_piped_stdout PROPERTIES FIXTURES_REQUIRED good_weights)
file(WRITE ${out}/replaced_with_overwrite.txt "not a metrics file\n")
add_run_check(train_images_outputs_overwrite_replaces_a_foreign_file
  -DCOMMAND=${short_run}|--metrics-out|${out}/replaced_with_overwrite.txt|--overwrite -DEXPECT_RC=0
  "-DEXPECT_OUTPUT=done: test accuracy" -DFILE=${out}/replaced_with_overwrite.txt
  "-DFILE_MATCHES=^\\{.*\"type\":\"summary\"")
add_run_check(train_images_outputs_plot_through_a_link -DCOMMAND=${short_run}|--plot|${out}/link_to_a_new_plot.png
  -DEXPECT_RC=0 "-DEXPECT_OUTPUT=done: test accuracy" -DFILE=${out}/plot_target.png "-DFILE_MATCHES=^.PNG"
  ${no_partial})

# Write failures: exit 1, the previous file unchanged, no temporary left. gnuplot's are a stand-in
# gnuplot first on PATH (fake_gnuplot/); a full disk is CNN_TEST_FAIL_AFTER_BYTES (AtomicFile).
set(fake_gnuplot ${CMAKE_COMMAND}|-E|env|PATH=${CMAKE_CURRENT_SOURCE_DIR}/train_images/fake_gnuplot:$ENV{PATH})
foreach(mode truncated stdout fail)
  add_run_check(train_images_outputs_plot_write_fails_${mode}
    -DCOMMAND=${fake_gnuplot}|FAKE_GNUPLOT=${mode}|${short_run}|--plot|${out}/previous_plot.png -DEXPECT_RC=1
    "-DEXPECT_OUTPUT=error: (writing|drawing) the plot .*previous_plot.png failed" "-DREJECT_OUTPUT=FAKE-PNG-BYTES"
    -DUNCHANGED=${out}/previous_plot.png ${no_partial})
endforeach()
add_test(NAME train_images_outputs_previous_checkpoint COMMAND ${CMAKE_COMMAND} -E copy ${good} ${out}/previous.ckpt)
set_tests_properties(train_images_outputs_previous_checkpoint PROPERTIES FIXTURES_REQUIRED good_weights
  FIXTURES_SETUP outputs_previous_checkpoint)
add_run_check(train_images_outputs_save_on_a_full_disk
  -DCOMMAND=${CMAKE_COMMAND}|-E|env|CNN_TEST_FAIL_AFTER_BYTES=1000|${short_run}|--save|${out}/previous.ckpt|--overwrite
  -DEXPECT_RC=1 "-DEXPECT_OUTPUT=error: writing .*previous.ckpt failed: No space left on device"
  -DUNCHANGED=${out}/previous.ckpt ${no_partial})
set_tests_properties(train_images_outputs_save_on_a_full_disk PROPERTIES
  FIXTURES_REQUIRED outputs_previous_checkpoint)
add_run_check(train_images_outputs_predict_metrics_write_error
  -DCOMMAND=${train}|--load|${good}|--predict|${image}|--metrics-out|/dev/full -DEXPECT_RC=1
  "-DEXPECT_OUTPUT=error: writing the metrics file /dev/full failed")
set_tests_properties(train_images_outputs_predict_metrics_write_error PROPERTIES FIXTURES_REQUIRED good_weights)
file(WRITE ${out}/previous.jsonl "{\"type\":\"prediction\",\"file\":\"earlier.png\"}\n")
set(predict_metrics ${train}|--load|${good}|--predict|${image}|--metrics-out|${out}/previous.jsonl)
add_run_check(train_images_outputs_predict_metrics_on_a_full_disk
  -DCOMMAND=${CMAKE_COMMAND}|-E|env|CNN_TEST_FAIL_AFTER_BYTES=10|${predict_metrics}
  -DEXPECT_RC=1 "-DEXPECT_OUTPUT=error: writing .*previous.jsonl failed: No space left on device"
  -DUNCHANGED=${out}/previous.jsonl ${no_partial})
set_tests_properties(train_images_outputs_predict_metrics_on_a_full_disk PROPERTIES FIXTURES_REQUIRED good_weights)
if(CNN_HAVE_ONNX)
  add_test(NAME train_images_outputs_previous_onnx
    COMMAND train_images --load ${good} --export-onnx ${out}/previous.onnx --overwrite)
  set_tests_properties(train_images_outputs_previous_onnx PROPERTIES FIXTURES_REQUIRED good_weights
    FIXTURES_SETUP outputs_previous_onnx)
  set(export_previous ${train}|--load|${good}|--export-onnx|${out}/previous.onnx)
  add_run_check(train_images_outputs_export_on_a_full_disk
    -DCOMMAND=${CMAKE_COMMAND}|-E|env|CNN_TEST_FAIL_AFTER_BYTES=1000|${export_previous}
    -DEXPECT_RC=1 "-DEXPECT_OUTPUT=error: writing .*previous.onnx failed: No space left on device"
    -DUNCHANGED=${out}/previous.onnx ${no_partial})
  set_tests_properties(train_images_outputs_export_on_a_full_disk PROPERTIES
    FIXTURES_REQUIRED outputs_previous_onnx)
endif()
