/// Who hears how one request ended: the delegate, for a CoreBluetooth-style call, or the task awaiting it, for
/// an async call.
///
/// Every public request is one operation of the host with one completion (the host knows it by its operation
/// id). That completion reaches the manager's queue once, and there it is handed to exactly one consumer: the
/// `Reply` the request was made with. The delegate-style and async-style methods are two ways of making the
/// same request, so the two styles can be mixed on one object, and concurrent async calls on one object each
/// get their own answer.
///
/// Besides the reply, the delegate is told of every change of a value (`didUpdateValueFor`), whichever style
/// asked for the read, as CoreBluetooth's delegate is told of every value the peripheral reports.
enum Reply<Value: Sendable>: Sendable {
    /// The delegate's callback reports the outcome.
    case delegate
    /// This closure does, on the manager's queue.
    case task(@Sendable (Result<Value, BluetoothError>) -> Void)

    /// Whether the delegate hears the outcome.
    var isDelegate: Bool {
        if case .delegate = self { return true }
        return false
    }

    /// Hands the outcome to the task, if the request was a task's.
    func finish(_ result: Result<Value, BluetoothError>) {
        if case .task(let body) = self { body(result) }
    }
}

extension Result {
    /// The error, when this is a failure.
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
