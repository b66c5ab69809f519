#include "route/route.h"

leash__req leash__req_posted;
