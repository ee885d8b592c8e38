/// CoreFoundation's run-loop calls, which Foundation on Linux links in and exports
/// but no longer declares to Swift. The peer needs the wake-up: on Linux,
/// RunLoop.perform (CFRunLoopPerformBlock) only enqueues the block, and a loop
/// sleeping in epoll does not see it until something wakes it.

#include "CBenchmarkPeers.h"

extern void *CFRunLoopGetCurrent(void);
extern void CFRunLoopWakeUp(void *runloop);
extern void CFRunLoopStop(void *runloop);

void *bench_cf_runloop_current(void) { return CFRunLoopGetCurrent(); }
void bench_cf_runloop_wake_up(void *runloop) { CFRunLoopWakeUp(runloop); }
void bench_cf_runloop_stop(void *runloop) { CFRunLoopStop(runloop); }
