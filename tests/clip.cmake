# dtrain-clip core: model, tokenizers, loss, schedule, checkpoints and short training runs on the
# real Fashion-MNIST files.
if(TARGET dtrain_clip_train)
  dtrain_test(clip_model_test SOURCES clip_model_test.cpp LIBS dtrain_clip_train)
  target_precompile_headers(clip_model_test REUSE_FROM dtrain_clip_model)
  # The transformer's layers: pooled block, one-node linear layer, self-attention's paths.
  dtrain_test(clip_layers_test SOURCES clip_layers_test.cpp LIBS dtrain_clip_train)
  target_precompile_headers(clip_layers_test REUSE_FROM dtrain_clip_model)
  # --cuda-graphs' static-buffer step, run eagerly on the CPU.
  dtrain_test(clip_captured_step_test SOURCES clip_captured_step_test.cpp LIBS dtrain_clip_train
              TIMEOUT 120)
  target_precompile_headers(clip_captured_step_test REUSE_FROM dtrain_clip_model)
  # The bfloat16 copies of the matrix weights: autocast's numbers from one copy a step.
  dtrain_test(clip_weight_copies_test SOURCES clip_weight_copies_test.cpp LIBS dtrain_clip_train)
  target_precompile_headers(clip_weight_copies_test REUSE_FROM dtrain_clip_model)
  dtrain_test(clip_tokenizer_test SOURCES clip_tokenizer_test.cpp LIBS dtrain_clip_train)
  # The thread that stages the next batches beside the step, on the real loaders.
  dtrain_test(clip_batch_stager_test SOURCES clip_batch_stager_test.cpp LIBS dtrain_clip_train
              TIMEOUT 60)
  target_precompile_headers(clip_batch_stager_test REUSE_FROM dtrain_clip_model)
  # Each run trains with 2 threads: two at once on a 2-core machine oversubscribe OpenMP (a run
  # of 10 s alone passed 240 s beside another), so `ctest -j2` runs them one at a time.
  dtrain_test(clip_training_test SOURCES clip_training_test.cpp
              LIBS dtrain_clip_train nlohmann_json::nlohmann_json TIMEOUT 240
              RESOURCE_LOCK clip_training)
  add_dependencies(clip_training_test dtrain-clip)
  if(TARGET dtrain)  # --profile-steps' trace read by dtrain timeline
    add_dependencies(clip_training_test dtrain)
  endif()
  dtrain_test(clip_checkpoint_test SOURCES clip_checkpoint_test.cpp LIBS dtrain_clip_train)
  target_precompile_headers(clip_checkpoint_test REUSE_FROM dtrain_clip_model)
  # The metrics file on a disk that fills up (root): lines lost and counted, the rest whole.
  dtrain_test(clip_metrics_log_test SOURCES clip_metrics_log_test.cpp LIBS dtrain_clip_train)
  dtrain_test(clip_checkpoint_kill_test SOURCES clip_checkpoint_kill_test.cpp TIMEOUT 300)
  add_dependencies(clip_checkpoint_kill_test dtrain-clip)
  # `dtrain-clip check` on the CPU: every check runs and passes (bench/clip_gpu.sh runs it on a GPU).
  add_test(NAME clip.check_cpu COMMAND dtrain-clip check --device cpu)
  set_tests_properties(clip.check_cpu PROPERTIES LABELS clip TIMEOUT 120 PASS_REGULAR_EXPRESSION
    "PASS  attention .*PASS  attention-causal .*PASS  patch-embedding .*PASS  linear-rows .*PASS  layer-norm .*PASS  weight-copies .*PASS  captured-step .*PASS  captured-lengths .*every check passed")
endif()

# dtrain-clip's shell completion, written from the --help texts (torch-free), and the scripts
# run for real in bash, zsh and fish against the built dtrain-clip's parsers.
if(TARGET dtrain_clip_config)
  dtrain_test(clip_completion_test SOURCES clip_completion_test.cpp LIBS dtrain_clip_config
              TIMEOUT 60)
endif()
if(TARGET dtrain-clip)
  add_test(NAME clip.completion_shells
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/clip_completion.sh $<TARGET_FILE:dtrain-clip>)
  set_tests_properties(clip.completion_shells PROPERTIES LABELS clip TIMEOUT 300)
endif()

# GPU-timed spans' event ring against a fake device clock (torch-free).
if(TARGET dtrain_clip_trace)
  dtrain_test(clip_device_span_ring_test SOURCES clip_device_span_ring_test.cpp
              LIBS dtrain_clip_trace TIMEOUT 60)
endif()

# Checkpoints on nodes without shared storage: a copy on every node, the newest taken at a resume.
if(TARGET dtrain-clip)
  dtrain_test(clip_node_local_checkpoints_test SOURCES clip_node_local_checkpoints_test.cpp
              TIMEOUT 300)
  add_dependencies(clip_node_local_checkpoints_test dtrain-clip)
endif()

# SIGTERM, SIGINT, SIGUSR1: every rank stops after one step with its checkpoint, or ends once
# no step can end.
if(TARGET dtrain-clip)
  dtrain_test(clip_stop_signal_test SOURCES clip_stop_signal_test.cpp TIMEOUT 300)
  add_dependencies(clip_stop_signal_test dtrain-clip)
endif()

# Mid-epoch resumption through the launcher, on the same and on fewer ranks.
if(TARGET dtrain_clip_train AND TARGET dtrain)
  dtrain_test(clip_resume_test SOURCES clip_resume_test.cpp TIMEOUT 300)
  add_dependencies(clip_resume_test dtrain dtrain-clip)
endif()
