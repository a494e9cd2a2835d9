# Slurm transport: unit tests, and integration tests against a real Slurm (munged, slurmctld and
# slurmd started by tests/slurm/slurm-cluster.sh) that skip with a message when Slurm is absent.
dtrain_test(slurm_unit_test SOURCES slurm_unit_test.cpp LIBS dtrain_launcher TIMEOUT 60)
