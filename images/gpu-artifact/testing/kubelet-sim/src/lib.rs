//! Skeleton; filled by its work package.
