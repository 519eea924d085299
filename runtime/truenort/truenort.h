// libtruenort, the truenoc runtime: include this one header (docs/runtime.md).
#pragma once

#include "truenort/ArchSelect.h"
#include "truenort/Bundle.h"
#include "truenort/Context.h"
#include "truenort/Driver.h"
#include "truenort/Nvtx.h"
#include "truenort/Pool.h"
#include "truenort/Result.h"
