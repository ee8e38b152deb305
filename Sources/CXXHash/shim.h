#include <xxhash.h>
