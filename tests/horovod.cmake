# Horovod without horovodrun: the rendezvous server's protocol on its own, then real
# horovod.torch programs (from .venv-horovod, made by scripts/install-deps.sh --tests) under dtrain launch.
dtrain_test(horovod_rendezvous_test SOURCES horovod/horovod_rendezvous_test.cpp
            LIBS dtrain_launcher LABEL horovod)
dtrain_test(horovod_elastic_rounds_test SOURCES horovod/horovod_elastic_rounds_test.cpp
            LIBS dtrain_launcher LABEL horovod)
if(TARGET dtrain)
  dtrain_test(horovod_launch_test SOURCES horovod/horovod_launch_test.cpp LIBS dtrain_launcher
              LABEL horovod TIMEOUT 900 RESOURCE_LOCK netns)
  add_dependencies(horovod_launch_test dtrain)
  dtrain_test(horovod_elastic_test SOURCES horovod/horovod_elastic_test.cpp LIBS dtrain_launcher
              LABEL horovod TIMEOUT 600 RESOURCE_LOCK netns)
  add_dependencies(horovod_elastic_test dtrain)
  dtrain_test(horovod_elastic_discovery_test SOURCES horovod/horovod_elastic_discovery_test.cpp
              LIBS dtrain_launcher LABEL horovod TIMEOUT 600 RESOURCE_LOCK netns)
  add_dependencies(horovod_elastic_discovery_test dtrain)
endif()
dtrain_test(horovod_worker_notice_test SOURCES horovod/horovod_worker_notice_test.cpp
            LIBS dtrain_launcher LABEL horovod)
