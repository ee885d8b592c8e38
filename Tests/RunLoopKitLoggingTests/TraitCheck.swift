// These tests exercise an adapter that compiles to an empty module without its trait.
#if !Logging
#error("these tests need the Logging trait: run swift test --enable-all-traits")
#endif
