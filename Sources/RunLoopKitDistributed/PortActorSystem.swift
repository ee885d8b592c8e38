// Scaffold: replaced by the distributed-actor work.
import RunLoopKit
