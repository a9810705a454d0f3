//! A process's mount table as the kernel writes it (`/proc/PID/mountinfo`): what the floor
//! reads of it to tell whether a cache's overlay was mounted and whether the kernel would
//! give the tree a `/proc` of its own.

/// One line of a mount table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount<'a> {
    /// The mount's id.
    pub id: u64,
    /// Its parent's id.
    pub parent: u64,
    /// The directory of its file system it shows (`/` for the whole of it).
    pub root: String,
    /// Where it is mounted.
    pub point: String,
    /// The mount's own options (`ro`, `relatime`, …).
    pub options: Vec<&'a str>,
    /// Its file system's type.
    pub fstype: &'a str,
    /// Its file system's options (the superblock's).
    pub super_options: Vec<&'a str>,
}

/// The mounts of `table` (a whole `mountinfo`'s text); a line it cannot read is skipped.
pub fn parse(table: &str) -> impl Iterator<Item = Mount<'_>> {
    table.lines().filter_map(Mount::parse)
}

impl Mount<'_> {
    /// `ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL…] - FSTYPE SOURCE SUPER_OPTIONS`.
    pub fn parse(line: &str) -> Option<Mount<'_>> {
        let (left, right) = line.split_once(" - ")?;
        let mut l = left.split(' ');
        let id = l.next()?.parse().ok()?;
        let parent = l.next()?.parse().ok()?;
        let (root, point) = (unescape(l.nth(1)?), unescape(l.next()?));
        let options = l.next()?.split(',').collect();
        let mut r = right.split(' ');
        let fstype = r.next()?;
        let super_options = r.nth(1).unwrap_or_default().split(',').collect();
        Some(Mount {
            id,
            parent,
            root,
            point,
            options,
            fstype,
            super_options,
        })
    }
}

/// A path of the table's, whose space, tab, newline and backslash the kernel writes in
/// octal (`\040`).
pub(crate) fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push(d.iter().fold(0u8, |n, c| n.wrapping_mul(8) + (c - b'0')));
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_read_whole_and_its_escapes_undone() {
        let line = "36 25 0:33 / /home/a\\040b rw,nosuid,relatime shared:15 - overlay \
                    overlay rw,lowerdir=/l";
        let m = Mount::parse(line).unwrap();
        assert_eq!((m.id, m.parent), (36, 25));
        assert_eq!((m.root.as_str(), m.point.as_str()), ("/", "/home/a b"));
        assert_eq!(m.options, ["rw", "nosuid", "relatime"]);
        assert_eq!(m.fstype, "overlay");
        assert_eq!(m.super_options, ["rw", "lowerdir=/l"]);
        assert_eq!(parse("not a mount\n").count(), 0);
        assert_eq!(unescape("/mnt/a\\040b\\134c"), "/mnt/a b\\c");
    }
}
