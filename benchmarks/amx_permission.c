// Preloaded into IREE's tools by dispatch_profile.py (LD_PRELOAD): asks Linux, before main, for the
// process's permission to use AMX tile data (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)),
// which kiln's runtime asks for in-process and iree-benchmark-module does not; without it kiln's
// AMX kernel dies of SIGILL. On a CPU without AMX the request fails and changes nothing.
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((constructor)) static void request_amx(void) { syscall(SYS_arch_prctl, 0x1023, 18); }
