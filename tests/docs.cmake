# Documentation checks: every man page renders without a single groff warning, and every
# subcommand answers --help with status 0.
find_program(GROFF groff REQUIRED)
file(GLOB DOC_MAN_PAGES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/man/*.1 ${PROJECT_SOURCE_DIR}/man/*.5
     ${PROJECT_SOURCE_DIR}/man/*.7)
foreach(page ${DOC_MAN_PAGES})
  get_filename_component(page_name ${page} NAME)
  add_test(NAME docs_groff_${page_name}
    COMMAND sh -c "out=$(${GROFF} -ww -man -z \"$1\" 2>&1); if [ -n \"$out\" ]; then echo \"$out\"; exit 1; fi"
            groff-check ${page})
  set_tests_properties(docs_groff_${page_name} PROPERTIES LABELS docs TIMEOUT 30)
endforeach()

foreach(args "--help" "--version" "init --help" "doctor --help" "launch --help" "logs --help"
             "timeline --help" "status --help" "sync --help" "completion --help" "help launch"
             "completion bash")
  string(REPLACE " " "_" test_suffix "${args}")
  string(REPLACE "-" "" test_suffix "${test_suffix}")
  separate_arguments(arg_list UNIX_COMMAND "${args}")
  add_test(NAME docs_cli_${test_suffix} COMMAND $<TARGET_FILE:dtrain> ${arg_list})
  set_tests_properties(docs_cli_${test_suffix} PROPERTIES LABELS docs TIMEOUT 30)
endforeach()

# dtrain-clip: every command answers --help, and --version prints the five lines DESIGN.md names,
# with the CUDA/NCCL and Gloo lines this build must have (the wheel's LibTorch has all three).
if(TARGET dtrain-clip)
  foreach(args "--help" "train --help" "export-data --help" "export-weights --help"
               "bandwidth --help" "store --help" "check --help" "completion --help")
    string(REPLACE " " "_" test_suffix "${args}")
    string(REPLACE "-" "" test_suffix "${test_suffix}")
    separate_arguments(arg_list UNIX_COMMAND "${args}")
    add_test(NAME docs_clip_${test_suffix} COMMAND $<TARGET_FILE:dtrain-clip> ${arg_list})
    set_tests_properties(docs_clip_${test_suffix} PROPERTIES LABELS docs TIMEOUT 30)
  endforeach()
  get_target_property(clip_defs dtrain_clip_torch INTERFACE_COMPILE_DEFINITIONS)
  set(cuda_line "cuda none\nnccl none")
  if("DTRAIN_HAVE_CUDA" IN_LIST clip_defs)
    set(cuda_line "cuda [0-9]+\\.[0-9]+\nnccl [0-9]+\\.[0-9]+\\.[0-9]+")
  endif()
  set(gloo_line "gloo no")
  if("DTRAIN_HAVE_GLOO" IN_LIST clip_defs)
    set(gloo_line "gloo yes")
  endif()
  add_test(NAME docs_clip_version COMMAND $<TARGET_FILE:dtrain-clip> --version)
  set_tests_properties(docs_clip_version PROPERTIES LABELS docs TIMEOUT 30 PASS_REGULAR_EXPRESSION
    "^dtrain-clip [0-9]+\\.[0-9]+\\.[0-9]+\nlibtorch 2\\.[0-9]+\\.[0-9]+\n${cuda_line}\n${gloo_line}\n$")
endif()

# The README's first command from its build step on (the default job and its timeline summary),
# in a fresh folder whose build/ is this build: CI runs the second command, this the first.
if(TARGET dtrain-clip AND TARGET dtrain)
  add_test(NAME docs.readme_default_job
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/readme_default_job.sh ${PROJECT_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR})
  set_tests_properties(docs.readme_default_job PROPERTIES LABELS integration TIMEOUT 600 COST 110
                       RESOURCE_LOCK clip_training)
endif()
