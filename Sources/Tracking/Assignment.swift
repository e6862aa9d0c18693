/// The optimal assignment of rows to columns of a cost matrix (the Hungarian method with row and
/// column potentials and shortest augmenting paths, the O(n²m) form Jonker and Volgenant's algorithm
/// refines): the pairing that minimizes the total cost, each row and column used at most once.
///
/// Its buffers are kept between calls, so a tracker that solves one assignment per frame allocates
/// nothing once they have grown to the largest matrix seen.
package struct Assignment {
    private var u: [Double] = []
    private var v: [Double] = []
    private var owner: [Int] = []
    private var way: [Int] = []
    private var smallest: [Double] = []
    private var used: [Bool] = []
    private var transposed: [Double] = []
    /// The pairs of the last solve: `(row, column)`.
    package private(set) var pairs: [(row: Int, column: Int)] = []

    package init() {}

    /// Solves for the `rows` x `columns` matrix `cost` (row-major); pairs whose cost exceeds
    /// `maximumCost` are left out of ``pairs`` (the rows and columns stay unmatched).
    package mutating func solve(_ cost: [Double], rows: Int, columns: Int, maximumCost: Double) {
        pairs.removeAll(keepingCapacity: true)
        guard rows > 0, columns > 0 else { return }
        if rows <= columns {
            solveWide(cost, rows: rows, columns: columns)
            for column in 1...columns where owner[column] != 0 {
                let row = owner[column] - 1
                if cost[row * columns + column - 1] <= maximumCost { pairs.append((row, column - 1)) }
            }
        } else {
            transposed.removeAll(keepingCapacity: true)
            for column in 0..<columns {
                for row in 0..<rows { transposed.append(cost[row * columns + column]) }
            }
            let matrix = transposed
            solveWide(matrix, rows: columns, columns: rows)
            for row in 1...rows where owner[row] != 0 {
                let column = owner[row] - 1
                if cost[(row - 1) * columns + column] <= maximumCost { pairs.append((row - 1, column)) }
            }
            pairs.sort { $0.row < $1.row }
        }
    }

    /// The assignment of every row of a matrix with no more rows than columns; `owner[j]` is the
    /// 1-based row given column `j` (1-based), 0 for none.
    private mutating func solveWide(_ a: [Double], rows n: Int, columns m: Int) {
        func reset<T>(_ array: inout [T], _ count: Int, _ value: T) {
            array.removeAll(keepingCapacity: true)
            array.append(contentsOf: repeatElement(value, count: count))
        }
        reset(&u, n + 1, 0)
        reset(&v, m + 1, 0)
        reset(&owner, m + 1, 0)
        reset(&way, m + 1, 0)
        for i in 1...n {
            owner[0] = i
            var j0 = 0
            reset(&smallest, m + 1, .infinity)
            reset(&used, m + 1, false)
            repeat {
                used[j0] = true
                let i0 = owner[j0]
                var delta = Double.infinity
                var j1 = 0
                for j in 1...m where !used[j] {
                    let reduced = a[(i0 - 1) * m + j - 1] - u[i0] - v[j]
                    if reduced < smallest[j] {
                        smallest[j] = reduced
                        way[j] = j0
                    }
                    if smallest[j] < delta {
                        delta = smallest[j]
                        j1 = j
                    }
                }
                for j in 0...m {
                    if used[j] {
                        u[owner[j]] += delta
                        v[j] -= delta
                    } else {
                        smallest[j] -= delta
                    }
                }
                j0 = j1
            } while owner[j0] != 0
            repeat {
                let j1 = way[j0]
                owner[j0] = owner[j1]
                j0 = j1
            } while j0 != 0
        }
    }
}
