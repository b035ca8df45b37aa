//! How a row meets the baselines it is compared with: the order of the runs within a round, and
//! how far apart in time a row and its baseline's run may be. The machine may change speed within
//! minutes, so a ratio is only as good as the closeness of its two runs.

use std::time::Duration;

/// A row is compared with a run of its baseline that ended at most this long before the row's own
/// run ended; otherwise the baseline runs again right after the row, and the row is compared with
/// that run (a slow row, such as another system's at small sizes, can take a minute).
pub const BASELINE_GAP: Duration = Duration::from_secs(10);

/// The order in which `items` run within a round, as indices into `items`: every item after the
/// baselines it is compared with (`baselines(item)`, those present in `items`), otherwise in the
/// given order.
pub fn baselines_first<T: Copy + PartialEq>(
    items: &[T],
    baselines: impl Fn(T) -> Vec<T>,
) -> Vec<usize> {
    // The longest chain of present baselines below `t`; `left` bounds the walk, so a cycle (which
    // no experiment's baselines have) would end it rather than recurse forever.
    fn depth<T: Copy + PartialEq>(
        t: T,
        items: &[T],
        baselines: &dyn Fn(T) -> Vec<T>,
        left: usize,
    ) -> usize {
        if left == 0 {
            return 0;
        }
        baselines(t)
            .into_iter()
            .filter(|b| items.contains(b))
            .map(|b| depth(b, items, baselines, left - 1) + 1)
            .max()
            .unwrap_or(0)
    }
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| depth(items[i], items, &baselines, items.len()));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baselines_run_before_the_rows_compared_with_them() {
        // 'c' is compared with 'b', 'b' with 'a'; 'd' with 'a' and 'c'; 'e' with nothing here.
        let bases = |t: char| match t {
            'b' => vec!['a'],
            'c' => vec!['b', 'x'],
            'd' => vec!['a', 'c'],
            _ => vec![],
        };
        let items = ['d', 'c', 'e', 'b', 'a'];
        let order: Vec<char> = baselines_first(&items, bases)
            .into_iter()
            .map(|i| items[i])
            .collect();
        assert_eq!(order, ['e', 'a', 'b', 'c', 'd']);
        // Absent baselines do not count: 'c' alone keeps its place.
        assert_eq!(baselines_first(&['c', 'e'], bases), [0, 1]);
        // A cycle ends.
        let cyclic = |t: char| if t == 'a' { vec!['b'] } else { vec!['a'] };
        assert_eq!(baselines_first(&['a', 'b'], cyclic).len(), 2);
    }
}
