/**
 * The field names of the engine's Go structs that the docker gate reads bodies against (Docker
 * 20.10.24, github.com/docker/docker api/types and runconfig): a key selecting one of these (in any
 * spelling Go's decoder accepts) is the engine's; any other key is unknown and refused. A field of a
 * newer engine that is not listed is thereby refused too, until someone adds it here on purpose.
 */

import type { Dropped } from './shape';

/** container.Config (the top level of POST /containers/create). */
export const CONFIG_FIELDS = [
  'Hostname', 'Domainname', 'User', 'AttachStdin', 'AttachStdout', 'AttachStderr', 'ExposedPorts', 'Tty', 'OpenStdin',
  'StdinOnce', 'Env', 'Cmd', 'Healthcheck', 'ArgsEscaped', 'Image', 'Volumes', 'WorkingDir', 'Entrypoint', 'NetworkDisabled',
  'MacAddress', 'OnBuild', 'Labels', 'StopSignal', 'StopTimeout', 'Shell',
] as const;

/** container.Resources (embedded in HostConfig: its fields are HostConfig's). */
export const RESOURCES_FIELDS = [
  'CpuShares', 'Memory', 'NanoCpus', 'CgroupParent', 'BlkioWeight', 'BlkioWeightDevice', 'BlkioDeviceReadBps',
  'BlkioDeviceWriteBps', 'BlkioDeviceReadIOps', 'BlkioDeviceWriteIOps', 'CpuPeriod', 'CpuQuota', 'CpuRealtimePeriod',
  'CpuRealtimeRuntime', 'CpusetCpus', 'CpusetMems', 'Devices', 'DeviceCgroupRules', 'DeviceRequests', 'KernelMemory',
  'KernelMemoryTCP', 'MemoryReservation', 'MemorySwap', 'MemorySwappiness', 'OomKillDisable', 'PidsLimit', 'Ulimits',
  'CpuCount', 'CpuPercent', 'IOMaximumIOps', 'IOMaximumBandwidth',
] as const;

/** container.HostConfig, Resources included. */
export const HOST_CONFIG_FIELDS = [
  'Binds', 'ContainerIDFile', 'LogConfig', 'NetworkMode', 'PortBindings', 'RestartPolicy', 'AutoRemove', 'VolumeDriver',
  'VolumesFrom', 'CapAdd', 'CapDrop', 'CgroupnsMode', 'Dns', 'DnsOptions', 'DnsSearch', 'ExtraHosts', 'GroupAdd', 'IpcMode',
  'Cgroup', 'Links', 'OomScoreAdj', 'PidMode', 'Privileged', 'PublishAllPorts', 'ReadonlyRootfs', 'SecurityOpt', 'StorageOpt',
  'Tmpfs', 'UTSMode', 'UsernsMode', 'ShmSize', 'Sysctls', 'Runtime', 'ConsoleSize', 'Isolation', ...RESOURCES_FIELDS,
  'Mounts', 'MaskedPaths', 'ReadonlyPaths', 'Init',
] as const;

/**
 * runconfig.ContainerConfigWrapper's own fields beside the embedded Config. It also embeds a whole
 * HostConfig at the top level (a deprecated spelling the engine still reads: with no "HostConfig" key,
 * top-level `Privileged` or `Binds` ARE the container's host config), so every HostConfig field is a
 * top-level field too.
 */
export const WRAPPER_FIELDS = ['HostConfig', 'Cpuset', 'NetworkingConfig'] as const;

/** types.ExecConfig (POST /containers/{id}/exec). */
export const EXEC_CONFIG_FIELDS = [
  'User', 'Privileged', 'Tty', 'AttachStdin', 'AttachStderr', 'AttachStdout', 'Detach', 'DetachKeys', 'Env', 'WorkingDir', 'Cmd',
] as const;

/** types.ExecStartCheck (POST /exec/{id}/start). */
export const EXEC_START_FIELDS = ['Detach', 'Tty'] as const;

export const ULIMIT_FIELDS = ['Name', 'Hard', 'Soft'] as const;
export const RESTART_POLICY_FIELDS = ['Name', 'MaximumRetryCount'] as const;
export const LOG_CONFIG_FIELDS = ['Type', 'Config'] as const;
export const MOUNT_FIELDS = ['Type', 'Source', 'Target', 'ReadOnly', 'Consistency', 'BindOptions', 'VolumeOptions', 'TmpfsOptions'] as const;
export const VOLUME_OPTIONS_FIELDS = ['NoCopy', 'Labels', 'DriverConfig'] as const;

/** Every other field of a struct, each refused by `rule` unless empty. */
export function droppedFields(all: readonly string[], used: readonly string[], rules: Record<string, Dropped>, otherwise: string): Record<string, Dropped> {
  return Object.fromEntries(all.filter((f) => !used.includes(f)).map((f) => [f, rules[f] ?? otherwise]));
}
