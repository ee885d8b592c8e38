#if Logging
import Testing
#endif
