# Benchmarks that must not rot: bench/clip_gpu.sh (the one-call GPU bench) run end to end on the
# CPU (fmnist-tiny, batch 32) against this build's dtrain-clip, then its results file checked for
# every section with numbers (bench/clip_gpu.py check), the kernel profile it runs at the first
# batch size (bench/clip_gpu_profile.sh: fmnist-tiny under bfloat16 autocast) included: every
# program profiled, its ATen operators counted.
if(TARGET dtrain-clip)
  set(clip_gpu_out ${CMAKE_CURRENT_BINARY_DIR}/clip_gpu_cpu)
  add_test(NAME bench.clip_gpu_cpu
           COMMAND sh -c "rm -rf \"$3\" && bash \"$1/bench/clip_gpu.sh\" --device cpu --build-dir \"$2\" --out \"$3\" && \"$1/.venv/bin/python3\" \"$1/bench/clip_gpu.py\" check \"$3/clip_gpu_results.json\""
                   clip-gpu-cpu ${PROJECT_SOURCE_DIR} $<TARGET_FILE_DIR:dtrain-clip> ${clip_gpu_out})
  set_tests_properties(bench.clip_gpu_cpu PROPERTIES LABELS bench TIMEOUT 300 COST 80)
endif()

# bench/clip_gpu.sh --carry-prepare (what a GPU machine without headers, vocabulary or OpenCLIP
# is given) made and then used with a Python that has no open_clip. Downloads OpenCLIP's wheels
# from PyPI, as scripts/install-deps.sh does.
add_test(NAME bench.clip_gpu_carry
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/bench_clip_gpu_carry.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(bench.clip_gpu_carry PROPERTIES LABELS bench TIMEOUT 180)

# bench/clip_kernels.py's "launched by" lines (which operators launched each kernel) on the
# recorded H100 trace of tests/fixtures/kineto: what clip_gpu_profile.sh prints on a GPU.
add_test(NAME bench.clip_kernels_launchers
         COMMAND ${PROJECT_SOURCE_DIR}/.venv/bin/python3
                 ${CMAKE_CURRENT_SOURCE_DIR}/bench_clip_kernels_launchers.py ${PROJECT_SOURCE_DIR})
set_tests_properties(bench.clip_kernels_launchers PROPERTIES LABELS bench TIMEOUT 60)
