//! The log's entries in one contiguous slice: the check searches and
//! indexes them as a plain sorted slice, with no wrapped indexing. Entries
//! leave from the front by moving a start index; the buffer is compacted
//! only when an append finds no room at its end.

use std::fmt;

use super::Micros;

/// The timestamps of allowed requests, oldest first.
///
/// ```
/// use limiter_model::algorithm::sliding_log::Log;
///
/// let log = Log::from([10, 20, 30]);
/// assert_eq!(log.as_slice(), [10, 20, 30]);
/// assert_eq!(log.len(), 3);
/// ```
#[derive(Clone, Default)]
pub struct Log {
    /// `buffer[start..]` are the entries; `buffer[..start]` have left.
    buffer: Vec<Micros>,
    start: usize,
}

impl Log {
    /// An empty log; it allocates once it holds an entry.
    pub const fn new() -> Self {
        Self {
            buffer: Vec::new(),
            start: 0,
        }
    }

    /// The entries, oldest first.
    #[inline]
    pub fn as_slice(&self) -> &[Micros] {
        // `start` never passes the buffer's length.
        &self.buffer[self.start..]
    }

    /// How many entries the log holds.
    #[inline]
    pub fn len(&self) -> usize {
        self.buffer.len() - self.start
    }

    /// Whether the log holds no entry.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.buffer.len() == self.start
    }

    /// The entries, oldest first.
    pub fn iter(&self) -> std::slice::Iter<'_, Micros> {
        self.as_slice().iter()
    }

    /// Drops the entries at or before `before` from the front.
    #[inline]
    pub(super) fn expire(&mut self, before: Micros) {
        let buffer = &self.buffer;
        let mut start = self.start;
        while start < buffer.len() && buffer[start] <= before {
            start += 1;
        }
        self.start = start;
        if start == buffer.len() {
            // Nothing left: the buffer starts over from its front.
            self.buffer.clear();
            self.start = 0;
        }
    }

    /// Appends `cost` entries at `at` at the back, or where they belong
    /// when later entries exist, holding at most about `most` entries'
    /// room beyond what is in use (see [`room`](Self::room)).
    #[inline]
    pub(super) fn record(&mut self, at: Micros, cost: u64, most: impl FnOnce() -> u64) {
        let cost = usize::try_from(cost).unwrap_or(usize::MAX);
        if self.buffer.capacity() - self.buffer.len() < cost {
            self.room(cost, most());
        }
        match self.buffer.last() {
            Some(&last) if last > at => self.insert(at, cost),
            _ if cost == 1 => self.buffer.push(at),
            _ => self.buffer.resize(self.buffer.len() + cost, at),
        }
    }

    /// Puts `cost` entries at `at` before the later entries.
    #[cold]
    fn insert(&mut self, at: Micros, cost: usize) {
        let position = self.start + self.as_slice().partition_point(|&t| t <= at);
        self.buffer
            .splice(position..position, std::iter::repeat_n(at, cost));
    }

    /// Makes room at the end for `cost` more entries: moves the entries to
    /// the buffer's front when the room that frees is enough, else grows
    /// the buffer by doubling, to at most half as much again as the `most`
    /// entries a log can hold (so a full log is compacted at most once
    /// every `most / 2` appends, and 20 entries take at most 240 bytes).
    #[cold]
    fn room(&mut self, cost: usize, most: u64) {
        let len = self.len();
        let needed = len.saturating_add(cost);
        let capacity = self.buffer.capacity();
        let most = usize::try_from(most).unwrap_or(usize::MAX);
        let ceiling = most.saturating_add(most.div_ceil(2));
        // Moving entries costs at most one move per slot it frees.
        if needed <= capacity && (self.start >= len || capacity >= ceiling) {
            self.buffer.copy_within(self.start.., 0);
            self.buffer.truncate(len);
        } else {
            self.buffer.drain(..self.start);
            let doubled = (capacity * 2).max(4);
            let target = doubled.min(ceiling).max(needed);
            self.buffer.reserve_exact(target - len);
        }
        self.start = 0;
    }

    /// Takes `count` entries off from index `at` on (both counted from the
    /// oldest).
    pub(super) fn remove(&mut self, at: usize, count: usize) {
        let from = self.start + at;
        self.buffer.drain(from..from + count);
    }

    /// The entries, oldest first, to change in place.
    pub(super) fn as_mut_slice(&mut self) -> &mut [Micros] {
        &mut self.buffer[self.start..]
    }
}

impl PartialEq for Log {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Log {}

impl<const N: usize> PartialEq<[Micros; N]> for Log {
    fn eq(&self, other: &[Micros; N]) -> bool {
        self.as_slice() == other
    }
}

impl fmt::Debug for Log {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl FromIterator<Micros> for Log {
    fn from_iter<I: IntoIterator<Item = Micros>>(entries: I) -> Self {
        Self {
            buffer: entries.into_iter().collect(),
            start: 0,
        }
    }
}

impl<const N: usize> From<[Micros; N]> for Log {
    fn from(entries: [Micros; N]) -> Self {
        entries.into_iter().collect()
    }
}

impl IntoIterator for Log {
    type Item = Micros;
    type IntoIter = std::iter::Skip<std::vec::IntoIter<Micros>>;

    fn into_iter(self) -> Self::IntoIter {
        self.buffer.into_iter().skip(self.start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_leave_from_the_front_and_the_room_is_reused() {
        let mut log = Log::new();
        for t in 1..=8 {
            log.record(t, 1, || 8);
        }
        assert_eq!(log.buffer.capacity(), 8);
        log.expire(4);
        assert_eq!(log, [5, 6, 7, 8]);
        // Four entries' room freed at the front, taken again: no growth.
        log.record(9, 1, || 8);
        assert_eq!(log, [5, 6, 7, 8, 9]);
        assert_eq!((log.start, log.buffer.capacity()), (0, 8));
    }

    #[test]
    fn a_full_log_grows_no_further_than_half_again_its_most() {
        let mut log = Log::new();
        for t in 0..20 {
            log.record(t, 1, || 20);
        }
        assert_eq!(log.buffer.capacity(), 30);
        for t in 20..200 {
            log.expire(t - 20);
            log.record(t, 1, || 20);
            assert_eq!(log.len(), 20);
            assert_eq!(log.buffer.capacity(), 30);
        }
        assert_eq!(log.as_slice(), (180..200).collect::<Vec<_>>());
    }

    #[test]
    fn entries_earlier_than_the_newest_go_where_they_belong() {
        let mut log = Log::from([1, 5, 9]);
        log.expire(1);
        log.record(6, 2, || 10);
        assert_eq!(log, [5, 6, 6, 9]);
        log.remove(1, 2);
        assert_eq!(log, [5, 9]);
        log.expire(9);
        assert!(log.is_empty());
        assert_eq!(log.into_iter().count(), 0);
    }
}
