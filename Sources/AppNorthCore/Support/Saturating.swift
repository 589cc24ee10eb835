/// Arithmetic that stops at the type's bounds instead of trapping.
///
/// Values from outside (server headers and bodies, host arguments, stored
/// rows, files, clocks) never reach `+ - *` directly: an overflow there is
/// a trap that kills the host. These give the nearest representable value
/// instead, which every caller treats as "very large / very old".
extension FixedWidthInteger {
    package func addingSaturating(_ other: Self) -> Self {
        let (sum, overflow) = addingReportingOverflow(other)
        guard overflow else { return sum }
        return other > 0 ? .max : .min
    }

    package func subtractingSaturating(_ other: Self) -> Self {
        let (difference, overflow) = subtractingReportingOverflow(other)
        guard overflow else { return difference }
        return other > 0 ? .min : .max
    }

    package func multipliedSaturating(by other: Self) -> Self {
        let (product, overflow) = multipliedReportingOverflow(by: other)
        guard overflow else { return product }
        return (self < 0) != (other < 0) ? .min : .max
    }
}
