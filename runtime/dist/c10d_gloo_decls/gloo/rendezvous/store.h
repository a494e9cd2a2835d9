// See gloo_declarations.h: dtrain-clip needs gloo's names, never its layouts.
#pragma once
#include "../gloo_declarations.h"
