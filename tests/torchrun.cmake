# torchrun parity: dtrain launch against a real torchrun (torch from .venv) on the same scripts
# (tests/torchrun/): the rank environment, @record error files, the job's TCPStore.
if(TARGET dtrain)
  dtrain_test(torchrun_parity_test SOURCES torchrun_parity_test.cpp LIBS dtrain_launcher
              LABEL torchrun TIMEOUT 600)
  add_dependencies(torchrun_parity_test dtrain)
  # The same report for a rank on an ssh namespace node with a private job folder.
  dtrain_test(torchrun_error_fetch_test SOURCES torchrun_error_fetch_test.cpp LIBS dtrain_launcher
              LABEL torchrun TIMEOUT 300 RESOURCE_LOCK netns)
  add_dependencies(torchrun_error_fetch_test dtrain)
  # The job's store SIGKILLed before it listens and while the ranks use it.
  dtrain_test(job_store_fault_test SOURCES job_store_fault_test.cpp LIBS dtrain_launcher
              LABEL torchrun TIMEOUT 600)
  add_dependencies(job_store_fault_test dtrain)
endif()
