// These tests exercise an adapter that compiles to an empty module without its trait.
#if !Tracing
#error("these tests need the Tracing trait: run swift test --enable-all-traits")
#endif
