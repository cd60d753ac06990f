#pragma once
// The project's error type lives in the public API; internal code includes it from here.
#include "vela/result.h"
