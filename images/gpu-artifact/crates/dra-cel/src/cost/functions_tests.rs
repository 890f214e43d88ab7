//! Unit tests of the list-extension estimates in `functions.rs`.

use super::*;
use crate::check::CelType;
use crate::cost::path::GoPath;

fn list(size: u64) -> Node<'static> {
    Node {
        expr: None,
        path: GoPath::default(),
        ty: CelType::Dyn,
        computed: Some(Size::fixed(size)),
    }
}

#[test]
fn sort_overloads_without_an_element_name_get_no_list_estimate() {
    let target = list(3);
    // `list_<element>_sort` sorts: 3 * 3 elements, by a factor of 2 plus one unit and the list.
    let sorted = extension_estimate("list_int_sort", Some(&target), &[], true).map(|e| e.cost);
    assert_eq!(
        sorted,
        Some(Cost {
            min: 9 * 2 + 1 + LIST_CREATE,
            max: 9 * 2 + 1 + LIST_CREATE
        })
    );
    // A name with no element between the prefix and the suffix (the old slicing panicked).
    assert!(extension_estimate("list_sort", Some(&target), &[], true).is_none());
    assert!(extension_estimate("list_sortByAssociatedKeys", Some(&target), &[list(2)], true).is_none());
    // Sets with a wrong number of arguments are left to the default estimate.
    assert!(extension_estimate("list_sets_contains_list", None, &[list(2)], true).is_none());
}
