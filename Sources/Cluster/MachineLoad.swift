import Foundation

/// How busy the machine is with work other than this process, from the kernel's counters: the
/// share of all cores that other processes used between two readings (`/proc/stat` for the
/// machine, `/proc/self/stat` for this process). Placement gives a node on a machine busy with
/// other work fewer sources.
///
/// ```swift
/// let before = MachineLoad.Reading.now()
/// // ... a while later
/// let share = MachineLoad.Reading.now().flatMap { now in before.flatMap { now.othersShare(since: $0) } }
/// ```
public enum MachineLoad {
    /// Clock-tick counters at one moment.
    public struct Reading: Sendable, Equatable {
        /// Every core's time, and the part not idle, machine-wide.
        public var total: UInt64
        public var busy: UInt64
        /// This process's user and system time.
        public var own: UInt64

        public init(total: UInt64, busy: UInt64, own: UInt64) {
            self.total = total
            self.busy = busy
            self.own = own
        }

        /// The counters now; nil where /proc is missing or unreadable.
        public static func now() -> Reading? {
            guard let machine = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
                  let own = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8) else { return nil }
            return parse(machine: machine, process: own)
        }

        /// Reads the first `cpu` line of /proc/stat (user nice system idle iowait irq softirq steal;
        /// guest time is already in user) and fields 14 and 15 (utime, stime) of /proc/self/stat,
        /// counted after the command name, which may hold spaces and parentheses.
        public static func parse(machine: String, process: String) -> Reading? {
            guard let line = machine.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") }) else { return nil }
            let ticks = line.split(separator: " ").dropFirst().prefix(8).compactMap { UInt64($0) }
            guard ticks.count >= 5, let close = process.lastIndex(of: ")") else { return nil }
            let fields = process[process.index(after: close)...].split(separator: " ")
            // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
            guard fields.count > 12, let user = UInt64(fields[11]), let system = UInt64(fields[12]) else { return nil }
            let total = ticks.reduce(0, +)
            return Reading(total: total, busy: total - ticks[3] - ticks[4], own: user + system)
        }

        /// The share of the machine (0...1, all cores) other processes used since `earlier`; nil
        /// when no time has passed in the counters.
        public func othersShare(since earlier: Reading) -> Double? {
            guard total > earlier.total else { return nil }
            let busyTicks = Double(busy &- earlier.busy), ownTicks = Double(own &- earlier.own)
            return min(1, max(0, (busyTicks - ownTicks) / Double(total - earlier.total)))
        }
    }
}
