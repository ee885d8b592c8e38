#if Logging
// Scaffold: replaced by the logging adapter work.
import Logging
import RunLoopKit
#endif
