# Documentation checks: every man page renders without a single groff warning, and every
# subcommand answers --help with status 0.
find_program(GROFF groff REQUIRED)
file(GLOB DOC_MAN_PAGES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/man/*.1 ${PROJECT_SOURCE_DIR}/man/*.5)
foreach(page ${DOC_MAN_PAGES})
  get_filename_component(page_name ${page} NAME)
  add_test(NAME docs_groff_${page_name}
    COMMAND sh -c "out=$(${GROFF} -ww -man -z \"$1\" 2>&1); if [ -n \"$out\" ]; then echo \"$out\"; exit 1; fi"
            groff-check ${page})
  set_tests_properties(docs_groff_${page_name} PROPERTIES LABELS docs TIMEOUT 30)
endforeach()

foreach(args "--help" "--version" "init --help" "doctor --help" "launch --help" "logs --help"
             "timeline --help" "completion --help" "help launch" "completion bash")
  string(REPLACE " " "_" test_suffix "${args}")
  string(REPLACE "-" "" test_suffix "${test_suffix}")
  separate_arguments(arg_list UNIX_COMMAND "${args}")
  add_test(NAME docs_cli_${test_suffix} COMMAND $<TARGET_FILE:dtrain> ${arg_list})
  set_tests_properties(docs_cli_${test_suffix} PROPERTIES LABELS docs TIMEOUT 30)
endforeach()
