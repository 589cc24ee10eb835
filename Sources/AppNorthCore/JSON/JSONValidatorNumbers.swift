/// The range checks of numbers: what strtod and strtoll would refuse
/// with ERANGE, decided on the digits.
extension JSONValidator {
    /// Whether an integer part (no leading zeros) with decimal digits running
    /// on to `fractionEnd` (past a '.') times 10^`exponent` rounds past
    /// DBL_MAX, as strtod (round to nearest) reports with ERANGE. The
    /// threshold is DBL_MAX plus half its last step, 2^1024 - 2^970, where a
    /// tie rounds to the even neighbour 2^1024: infinity.
    static func overflowsDouble(_ bytes: UnsafeBufferPointer<UInt8>, integer: Range<Int>,
                                fractionEnd: Int, exponent: Int) -> Bool {
        // The decimal exponent of the first significant digit.
        var first = integer.lowerBound
        var magnitude: Int
        if bytes[first] != UInt8(ascii: "0") {
            magnitude = integer.count - 1
        } else {
            // "0.000ddd": skip the point and the zeros after it.
            first = integer.upperBound + 1
            while first < fractionEnd, bytes[first] == UInt8(ascii: "0") { first += 1 }
            guard first < fractionEnd else { return false }  // zero
            magnitude = integer.upperBound - first
        }
        magnitude = magnitude.addingSaturating(exponent)
        if magnitude < 308 { return false }
        if magnitude > 308 { return true }
        // 10^308 <= |value| < 10^309: compare the digits with the threshold's.
        var k = 0
        var position = first
        let threshold = overflowThresholdDigits
        while position < fractionEnd {
            let digit = bytes[position]
            position += 1
            if digit == UInt8(ascii: ".") { continue }
            // All of the threshold's digits matched: the rest can only add.
            guard k < threshold.utf8CodeUnitCount else { return true }
            let limit = threshold.utf8Start[k]
            k += 1
            if digit != limit { return digit > limit }
        }
        return k == threshold.utf8CodeUnitCount  // equal digits: the tie
    }

    /// 2^1024 - 2^970 in decimal, without trailing zeros.
    private static let overflowThresholdDigits: StaticString =
        "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497792"

    /// Whether decimal digits (no leading zeros) are outside Int64, as
    /// strtoll reports with ERANGE.
    static func overflowsInt64(_ digits: Slice<UnsafeBufferPointer<UInt8>>, negative: Bool) -> Bool {
        let limit: StaticString = negative ? "9223372036854775808" : "9223372036854775807"
        if digits.count != limit.utf8CodeUnitCount { return digits.count > limit.utf8CodeUnitCount }
        for (k, digit) in digits.enumerated() where digit != limit.utf8Start[k] { return digit > limit.utf8Start[k] }
        return false
    }
}
