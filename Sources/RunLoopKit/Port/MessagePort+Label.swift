extension MessagePort {
    /// A name for the port's callouts in loop-health reports (`ThreadRunLoop.Callout.label`, one
    /// callout per message delivered), e.g. "requests". Read only when a callout is reported, so
    /// it costs the loop nothing otherwise. Any thread; a lock.
    public var label: String? {
        get { membership.label }
        set { membership.label = newValue }
    }
}
