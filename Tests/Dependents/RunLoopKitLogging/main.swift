// A one-file user of RunLoopKitLogging.
import RunLoopKitLogging

print("logging adapter linked")
