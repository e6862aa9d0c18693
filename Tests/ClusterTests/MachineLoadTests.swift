import Cluster
import Foundation
import Glibc
import Testing

/// The share of the machine other processes use, which placement gives a node fewer sources by.
@Suite struct MachineLoadTests {
    @Test("the kernel's counters are read past a command name with spaces and parentheses")
    func parsesProcFiles() throws {
        let machine = "cpu  100 5 50 800 20 3 2 0 7 0\ncpu0 50 2 25 400 10 1 1 0 3 0\nintr 1234\n"
        let process = "4242 (spotter (node 1)) S 1 4242 4242 0 -1 4194560 100 0 0 0 37 11 0 0 20 0 9 0 100 200 300"
        let reading = try #require(MachineLoad.Reading.parse(machine: machine, process: process))
        #expect(reading == MachineLoad.Reading(total: 980, busy: 160, own: 48))
        #expect(MachineLoad.Reading.parse(machine: "intr 1\n", process: process) == nil)
        #expect(MachineLoad.Reading.parse(machine: machine, process: "4242 (x) S 1") == nil)
        let later = MachineLoad.Reading(total: 1180, busy: 300, own: 68)
        #expect(later.othersShare(since: reading) == 0.6, "(140 busy - 20 own) / 200")
        #expect(reading.othersShare(since: reading) == nil)
    }

    @Test("a busy process beside this one counts as other work, as much as the kernel says it used")
    func busyNeighbourIsMeasured() throws {
        let hog = Process()
        hog.executableURL = URL(fileURLWithPath: "/bin/sh")
        hog.arguments = ["-c", "while :; do :; done"]
        try hog.run()
        // SIGKILL: the shell's loop may run with SIGTERM ignored (a test runner's children can inherit that).
        defer {
            kill(hog.processIdentifier, SIGKILL)
            hog.waitUntilExit()
        }
        func hogTicks() throws -> UInt64 {
            let stat = try String(contentsOfFile: "/proc/\(hog.processIdentifier)/stat", encoding: .utf8)
            let fields = stat[stat.index(after: try #require(stat.lastIndex(of: ")")))...].split(separator: " ")
            return try #require(UInt64(fields[11])) + (try #require(UInt64(fields[12])))
        }
        Thread.sleep(forTimeInterval: 0.2)
        let (before, hogBefore) = (try #require(MachineLoad.Reading.now()), try hogTicks())
        Thread.sleep(forTimeInterval: 1.5)
        let (after, hogAfter) = (try #require(MachineLoad.Reading.now()), try hogTicks())
        let share = try #require(after.othersShare(since: before))
        let hogShare = Double(hogAfter - hogBefore) / Double(after.total - before.total)
        #expect(hogShare > 0.2, "the hog ran: \(hogShare) of the machine")
        #expect(share >= hogShare - 0.05, "others \(share), the hog alone \(hogShare)")
        #expect(after.own >= before.own)
    }
}
