import Cluster
import Testing

/// How a cluster splits its sources over nodes (``LeaseKeeper/shares(of:capacities:)``).
@Suite struct PlacementTests {
    @Test("shares follow capacities, add up to the sources, and give every node one while there are enough")
    func sharesFollowCapacities() {
        #expect(LeaseKeeper.shares(of: 5, capacities: [("a", 0.5), ("b", 2.0)]) == ["a": 1, "b": 4])
        #expect(LeaseKeeper.shares(of: 6, capacities: [("n1", 2), ("n2", 2), ("n3", 2)]) == ["n1": 2, "n2": 2, "n3": 2])
        // Three nodes on one machine: the idle one measures the others' work as its own machine's load.
        #expect(LeaseKeeper.shares(of: 6, capacities: [("n3", 0.2), ("n1", 1.0), ("n2", 1.0)]) == ["n1": 2, "n2": 3, "n3": 1])
        #expect(LeaseKeeper.shares(of: 1, capacities: [("a", 1), ("b", 1)]) == ["a": 1, "b": 0])
        #expect(LeaseKeeper.shares(of: 0, capacities: [("a", 1)]) == ["a": 0])
    }

    @Test("for any capacities and counts: the sum, the order of the rows, and each share within one of its quota")
    func sharesAreAnApportionment() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let nodes = (0..<Int.random(in: 1...7, using: &generator)).map { ("node\($0)", Double(Int.random(in: 1...40, using: &generator)) / 10) }
            let count = Int.random(in: 0...50, using: &generator)
            let shares = LeaseKeeper.shares(of: count, capacities: nodes)
            #expect(shares.values.reduce(0, +) == count)
            #expect(LeaseKeeper.shares(of: count, capacities: nodes.shuffled(using: &generator)) == shares)
            let total = nodes.map(\.1).reduce(0, +)
            for (name, capacity) in nodes {
                let quota = Double(count) * capacity / total
                let share = shares[name]!
                if count >= nodes.count { #expect(share >= 1) }
                // Within one of the quota, except where a share was raised to one or lowered to give one.
                #expect(abs(Double(share) - quota) < 1 + Double(nodes.count), "\(nodes) \(count)")
                if share > 1 || count < nodes.count { #expect(Double(share) < quota + 1) }
            }
        }
    }
}
