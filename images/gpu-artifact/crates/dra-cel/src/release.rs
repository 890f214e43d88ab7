//! The Kubernetes releases whose API server environment for new selectors the checker follows.

/// A Kubernetes release whose API server checks new selectors in a known CEL environment. The
/// environments differ in what they declare: 1.34 (cel-go 0.26, compatibility version 1.33)
/// lacks cel-go's list extension, which later base environments add at compatibility version
/// 1.34, and still has `duration(int)`; 1.37 (cel-go 0.29) is the newest release verified.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KubernetesRelease {
    V1_34,
    /// Also used for 1.35 and 1.36, whose environments for new expressions declare the same
    /// libraries (not verified against their API servers).
    #[default]
    V1_37,
}

impl KubernetesRelease {
    /// Whether cel-go's list extension (`slice`, `flatten`, `distinct`, `reverse`, `sort`,
    /// `sortBy`, `lists.range`) is declared.
    pub(crate) fn has_list_extension(self) -> bool {
        self == KubernetesRelease::V1_37
    }

    /// Whether cel-go estimates the global `matches(string, string)` like the member form
    /// (cel-go 0.29 does, 0.26 charges it as an O(1) call).
    pub(crate) fn estimates_global_matches(self) -> bool {
        self == KubernetesRelease::V1_37
    }

    /// Whether the parser accepts backquoted identifiers (`` a.`b-c` ``): cel-go 0.29's does.
    pub(crate) fn has_identifier_escapes(self) -> bool {
        self == KubernetesRelease::V1_37
    }

    /// The release tag of the declaration table: an entry tagged with another release is absent.
    pub(crate) fn table_tag(self) -> &'static str {
        match self {
            KubernetesRelease::V1_34 => "1.34",
            KubernetesRelease::V1_37 => "1.37",
        }
    }
}
