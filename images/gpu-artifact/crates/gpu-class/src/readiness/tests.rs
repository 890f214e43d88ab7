use super::*;

fn findings() -> ClassFindings {
    ClassFindings {
        name: "a30".into(),
        counts: ClassDeviceCounts {
            published: 2,
            allocated: 1,
            free: 1,
        },
        extended_resource_name: Some("gpu.deckhouse.io/a30".into()),
        ..ClassFindings::default()
    }
}

#[test]
fn ready_says_what_is_requested_and_counts() {
    let verdict = ready_condition(&findings());
    assert_eq!((verdict.status, verdict.reason), ("True", reasons::READY));
    assert_eq!(
        verdict.message,
        "DeviceClass a30 is applied, requested as gpu.deckhouse.io/a30; 2 devices published, 1 allocated, 1 free"
    );
}

#[test]
fn blockers_come_first_in_their_order() {
    let mut f = findings();
    f.missing_label_keys = vec!["team".into()];
    f.blocker = Some(Blocker::DeviceClassNotManaged);
    assert_eq!(ready_condition(&f).reason, reasons::DEVICE_CLASS_NOT_MANAGED);
    f.blocker = Some(Blocker::Invalid(vec!["x".into(), "y".into()]));
    assert_eq!(ready_condition(&f).message, "no DeviceClass is rendered: x; y");
    f.blocker = None;
    assert_eq!(ready_condition(&f).reason, reasons::LABEL_NOT_FOUND);
}

#[test]
fn a_conflict_leaves_a_working_class_ready_and_says_so() {
    let mut f = findings();
    f.extended_resource_name = None;
    f.conflict = Some(ResourceConflict {
        resource: "gpu.deckhouse.io/a30".into(),
        holder: ResourceHolder::DeviceClass("nvidia-a30".into()),
    });
    let verdict = ready_condition(&f);
    assert_eq!(
        (verdict.status, verdict.reason),
        ("True", reasons::EXTENDED_RESOURCE_CONFLICT)
    );
    assert_eq!(
        verdict.message,
        "extended resource gpu.deckhouse.io/a30 belongs to DeviceClass nvidia-a30, so DeviceClass a30 is rendered \
         without it: claims naming the class work, Pods asking for gpu.deckhouse.io/a30 get DeviceClass nvidia-a30's \
         devices. Set spec.extendedResourceName to another name; 2 devices published, 1 allocated, 1 free"
    );
    assert!(verdict.is_warning());
    f.counts = ClassDeviceCounts::default();
    let verdict = ready_condition(&f);
    assert_eq!(
        (verdict.status, verdict.reason),
        ("False", reasons::NO_MATCHING_DEVICES),
        "its own reason first"
    );
    assert!(
        verdict.message.contains("belongs to DeviceClass nvidia-a30"),
        "{}",
        verdict.message
    );
}

#[test]
fn nothing_published_nor_allocated_is_not_ready_but_all_in_use_is() {
    let mut f = findings();
    f.counts.published = 0;
    assert_eq!(
        ready_condition(&f).status,
        "True",
        "the one card is with a virtual machine"
    );
    f.counts.allocated = 0;
    let verdict = ready_condition(&f);
    assert_eq!(
        (verdict.status, verdict.reason),
        ("False", reasons::NO_MATCHING_DEVICES)
    );
}
