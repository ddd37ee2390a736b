// version.go: `ldtorch version`: ldtorch's version, the libtorch runtime it runs on (shim
// ABI, build, CUDA, threads) and the Go runtime.

package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/urfave/cli/v2"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/torch"
)

// version is ldtorch's version.
const version = labeldistill.Version

// versionInfo is `ldtorch version --json`.
type versionInfo struct {
	Version      string `json:"version"`
	Libtorch     string `json:"libtorch_version"`
	ShimABI      int    `json:"shim_abi"`
	WantABI      int    `json:"binary_abi"`
	Build        string `json:"shim_build"`
	CUDA         bool   `json:"cuda_available"`
	CUDADevices  int    `json:"cuda_devices"`
	GPUs         []gpu  `json:"cuda_gpus,omitempty"` // each visible GPU, by index
	Threads      int    `json:"threads"`
	Gloo         bool   `json:"c10d_gloo"` // the shim has the collectives (--nproc, torchrun)
	Malloc       string `json:"malloc"`
	BLASCore     string `json:"blas_core"`   // OpenBLAS's kernel set (torch.BLASCore), "" for another BLAS
	DirectConv   string `json:"direct_conv"` // the shim's convolution kernels in use (torch.DirectConvISA), "" for libtorch's
	SIMDLoops    string `json:"simd_loops"`  // the ISA of the shim's LRN, max-pool and ConvNet-3 block loops (torch.SIMDLoopsISA)
	Mkldnn       string `json:"mkldnn"`      // libtorch's oneDNN convolutions, as checked (torch.ConvGuard.Summary)
	MkldnnOn     bool   `json:"mkldnn_enabled"`
	GOMAXPROCS   int    `json:"gomaxprocs"`
	NumCPU       int    `json:"num_cpu"`
	Go           string `json:"go_version"`
	Platform     string `json:"platform"`
	VCSRevision  string `json:"vcs_revision,omitempty"`
	RuntimeError string `json:"runtime_error,omitempty"`
}

// gpu is one GPU in `ldtorch version --json`.
type gpu struct {
	Index      int    `json:"index"`
	Name       string `json:"name,omitempty"`
	MemoryMiB  int64  `json:"memory_mib,omitempty"`
	Capability string `json:"compute_capability,omitempty"`
	Error      string `json:"error,omitempty"` // the query failed
}

func (g gpu) String() string {
	if g.Error != "" {
		return fmt.Sprintf("cuda:%d (%s)", g.Index, g.Error)
	}
	return fmt.Sprintf("cuda:%d %s (%d MiB, compute capability %s)", g.Index, g.Name, g.MemoryMiB, g.Capability)
}

// gpus describes the n visible GPUs.
func gpus(n int) []gpu {
	var out []gpu
	for i := 0; i < n; i++ {
		p, err := torch.CUDADeviceProperties(i)
		if err != nil {
			out = append(out, gpu{Index: i, Error: err.Error()})
			continue
		}
		out = append(out, gpu{Index: i, Name: p.Name, MemoryMiB: p.MemoryBytes >> 20, Capability: fmt.Sprintf("%d.%d", p.Major, p.Minor)})
	}
	return out
}

func (e *env) versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the versions of ldtorch, libtorch and the runtime",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "short", Usage: "print one line"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: e.versionAction,
	}
}

func (e *env) versionAction(c *cli.Context) error {
	if c.Args().Present() {
		return usageErrorf("unexpected argument %q", c.Args().First())
	}
	ti, rerr := torch.RuntimeInfo()
	v := versionInfo{
		Version: version, Libtorch: ti.TorchVersion, ShimABI: ti.ABIVersion, WantABI: torch.ABIVersion,
		Build: ti.Build, CUDA: ti.CUDA, CUDADevices: ti.CUDADevices, Threads: ti.Threads,
		Malloc:     mallocSummary(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(), Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
	if rerr == nil { // a shim of another ABI may lack the call
		v.DirectConv = torch.DirectConvISA()
		v.BLASCore = torch.BLASCore()
		v.SIMDLoops = torch.SIMDLoopsISA()
		g := e.guardConvolutions() // run before the action: this is its result
		v.Mkldnn, v.MkldnnOn = g.Summary(), g.Enabled
		if v.CUDA {
			v.GPUs = gpus(v.CUDADevices)
		}
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				v.VCSRevision = s.Value
			}
		}
	}
	if rerr != nil {
		v.RuntimeError = rerr.Error()
	} else {
		v.Gloo = torch.DistributedAvailable() // only once the shim is known to have the symbol
	}
	switch {
	case c.Bool("json"):
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s\n", b)
	case c.Bool("short"):
		dev := "cpu"
		if v.CUDA {
			dev = fmt.Sprintf("cuda×%d", v.CUDADevices)
		}
		fmt.Fprintf(e.stdout, "ldtorch %s (libtorch %s, shim ABI %d, %s)\n", v.Version, v.Libtorch, v.ShimABI, dev)
	default:
		fmt.Fprintf(e.stdout, "ldtorch     %s\n", v.Version)
		if v.VCSRevision != "" {
			fmt.Fprintf(e.stdout, "revision    %s\n", v.VCSRevision)
		}
		fmt.Fprintf(e.stdout, "libtorch    %s\n", v.Libtorch)
		fmt.Fprintf(e.stdout, "shim ABI    %d (this binary needs %d)\n", v.ShimABI, v.WantABI)
		fmt.Fprintf(e.stdout, "shim build  %s\n", v.Build)
		if v.CUDA {
			fmt.Fprintf(e.stdout, "CUDA        available, %d device(s)\n", v.CUDADevices)
			for _, g := range v.GPUs {
				fmt.Fprintf(e.stdout, "            %v\n", g)
			}
		} else {
			fmt.Fprintf(e.stdout, "CUDA        not available\n")
		}
		fmt.Fprintf(e.stdout, "threads     %d (libtorch intra-op)\n", v.Threads)
		if v.Gloo {
			fmt.Fprintf(e.stdout, "c10d        Gloo (data-parallel: distill --nproc, torchrun)\n")
		} else {
			fmt.Fprintf(e.stdout, "c10d        not built (no Gloo headers when the shim was built)\n")
		}
		fmt.Fprintf(e.stdout, "malloc      %s\n", v.Malloc)
		if v.BLASCore != "" {
			fmt.Fprintf(e.stdout, "BLAS        OpenBLAS, %s kernels%s\n", v.BLASCore, blasCoreNote())
		}
		if v.DirectConv != "" {
			fmt.Fprintf(e.stdout, "kernels     direct 5×5 convolutions, %s (LDTORCH_DIRECT_CONV=off: libtorch's)\n", v.DirectConv)
		} else {
			fmt.Fprintf(e.stdout, "kernels     libtorch's convolutions\n")
		}
		if v.SIMDLoops != "" {
			fmt.Fprintf(e.stdout, "            LRN, max-pool and ConvNet-3 block loops of the shim, %s\n", v.SIMDLoops)
		}
		if v.Mkldnn != "" {
			fmt.Fprintf(e.stdout, "oneDNN      %s\n", v.Mkldnn)
		}
		fmt.Fprintf(e.stdout, "GOMAXPROCS  %d (%d CPUs)\n", v.GOMAXPROCS, v.NumCPU)
		fmt.Fprintf(e.stdout, "go          %s %s\n", v.Go, v.Platform)
	}
	if rerr != nil {
		return failuref("%v", rerr)
	}
	return nil
}
