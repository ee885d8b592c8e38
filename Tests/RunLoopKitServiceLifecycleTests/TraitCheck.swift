// These tests exercise an adapter that compiles to an empty module without its trait.
#if !ServiceLifecycle
#error("these tests need the ServiceLifecycle trait: run swift test --enable-all-traits")
#endif
