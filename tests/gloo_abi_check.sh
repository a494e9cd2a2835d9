#!/usr/bin/env bash
# usage: gloo_abi_check.sh LIBDTRAIN_RUNTIME.a
# dtrain-clip compiles c10d's ProcessGroupGloo.hpp against declarations of gloo's names only
# (runtime/dist/c10d_gloo_decls). That is sound only while nothing dtrain builds depends on a gloo
# class's layout: no definition in namespace gloo (inline functions, vtables, typeinfo) and none
# of ProcessGroupGloo::GlooStore (a gloo::rendezvous::Store subclass) may be emitted here. And the
# library must really use LibTorch's Gloo backend, so the check cannot pass on a build without it.
set -euo pipefail
lib=$1
own=$(nm -C --defined-only "$lib" 2>/dev/null |
  grep -E ' (vtable for |typeinfo for |typeinfo name for |VTT for |construction vtable for )?(gloo::|c10d::ProcessGroupGloo::GlooStore)' || true)
if [ -n "$own" ]; then
  echo "FAIL: $lib defines gloo code of its own (its layout would be guessed):"
  echo "$own"
  exit 1
fi
undefined=$(nm -C --undefined-only "$lib")
if ! grep -qF 'c10d::ProcessGroupGloo::ProcessGroupGloo(' <<<"$undefined"; then
  echo "FAIL: $lib does not construct LibTorch's ProcessGroupGloo: not a Gloo build"
  exit 1
fi
echo "ok: no gloo definitions in $(basename "$lib"); ProcessGroupGloo comes from LibTorch"
