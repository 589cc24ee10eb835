import Glibc

/// A reproducible random source for the generated-input tests (SplitMix64).
/// Each run takes a new seed and prints it; APPNORTH_TEST_SEED=N runs a
/// failing one again.
struct SeededGenerator: RandomNumberGenerator {
    let seed: UInt64
    private var state: UInt64

    init(_ test: String) {
        var fresh = SystemRandomNumberGenerator()
        let given = getenv("APPNORTH_TEST_SEED").flatMap { UInt64(String(cString: $0)) }
        seed = given ?? fresh.next()
        state = seed
        print("\(test): seed \(seed) (APPNORTH_TEST_SEED=\(seed) repeats it)")
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
