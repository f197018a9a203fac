import ArgumentParser

/// Numbers from the command line, checked before anything runs: each must be finite and in range, and a bad one
/// is a usage error that names its option. (Converting an unchecked `Double` of seconds to a `Duration` traps on
/// infinity, NaN or 1e18; a negative one would mean "at once" or "for ever" by accident.)
enum CommandLineNumbers {
    /// The longest span of seconds an option accepts: a year.
    static let maximumSeconds: Double = 31_536_000

    /// Checks seconds given for `option`: finite, at least `minimum` (0 or more), at most a year.
    static func checkSeconds(_ value: Double, option: String, minimum: Double = 0, zeroAllowed: Bool = true) throws {
        guard value.isFinite else { throw ValidationError("\(option) must be a number of seconds, not \(value)") }
        guard value >= minimum, zeroAllowed || value > 0 else {
            throw ValidationError(
                "\(option) must be \(zeroAllowed ? "0 or more" : "more than 0") seconds, not \(format(value))")
        }
        guard value == 0 || value >= 0.001 else {
            throw ValidationError("\(option) must be at least 0.001 seconds (a millisecond), not \(value)")
        }
        guard value <= maximumSeconds else {
            throw ValidationError(
                "\(option) must be at most \(Int(maximumSeconds)) seconds (a year), not \(format(value))")
        }
    }

    /// Checks a count given for `option`: at least `minimum`.
    static func checkCount(_ value: Int, option: String, minimum: Int) throws {
        guard value >= minimum else { throw ValidationError("\(option) must be \(minimum) or more, not \(value)") }
    }

    /// Seconds already checked by `checkSeconds`, as a duration (millisecond resolution).
    static func duration(seconds: Double) -> Duration {
        .milliseconds(Int64((min(max(seconds, 0), maximumSeconds) * 1000).rounded()))
    }

    private static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
    }
}
