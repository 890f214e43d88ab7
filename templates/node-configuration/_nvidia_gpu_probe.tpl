{{- /* The shell function both NodeGroupConfigurations use to tell whether a node has an NVIDIA GPU: a PCI
device of vendor 0x10de and class 0x03xx (display or 3D controller; NVIDIA's HDMI audio function is
0x0403 and does not count), the same devices gpu-node-agent inventories (GPU_VENDORS 10de). */ -}}
{{- define "gpu.nodeConfiguration.hasNvidiaGpu" -}}
has_nvidia_gpu() {
  local dev
  for dev in /sys/bus/pci/devices/*; do
    [ "$(cat "$dev/vendor" 2>/dev/null)" = "0x10de" ] || continue
    case "$(cat "$dev/class" 2>/dev/null)" in 0x03*) return 0 ;; esac
  done
  return 1
}
{{- end -}}
