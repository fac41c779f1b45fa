// Command statecraft-olm-validate checks OLM bundle directories with the Operator
// Framework's own bundle loader and validators, the code behind `operator-sdk bundle
// validate` and OperatorHub's checks, so that a bundle we call valid is one OLM's tooling
// accepts, not one that matches our reading of the format.
//
//	statecraft-olm-validate [--optional-values k8s-version=1.34] <bundle-dir>...
//
// Each bundle directory holds manifests/ (a ClusterServiceVersion, its CRDs and other
// objects, one per file) and metadata/annotations.yaml. Every error and warning is printed
// on its own line, prefixed with the bundle directory; the exit status is 1 when any bundle
// has an error or cannot be loaded.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	verrors "github.com/operator-framework/api/pkg/validation/errors"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// validators: the defaults (CSV, CRDs, the bundle as a whole) plus what OperatorHub and
// the good-practices check add. OperatorHubV2 and the two Standard* validators are the
// module's replacement for the deprecated OperatorHubValidator; OperatorHubV2 also runs
// the removed-API checks against the optional k8s-version.
var validators = append(validation.DefaultBundleValidators,
	validation.OperatorHubV2Validator,
	validation.StandardCapabilitiesValidator,
	validation.StandardCategoriesValidator,
	validation.GoodPracticesValidator,
)

func main() {
	optional := map[string]string{}
	flag.Func("optional-values", "`key=value[,...]` options for the validators, e.g. k8s-version=1.34 (repeatable)", func(s string) error {
		for _, kv := range strings.Split(s, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("%q is not key=value", kv)
			}
			optional[k] = v
		}
		return nil
	})
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [--optional-values k8s-version=1.34] <bundle-dir>...\n", filepath.Base(os.Args[0]))
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}

	failed := false
	for _, dir := range flag.Args() {
		errs, warns := validate(dir, optional)
		for _, w := range warns {
			fmt.Printf("%s: WARN: %s\n", dir, w)
		}
		for _, e := range errs {
			fmt.Printf("%s: ERROR: %s\n", dir, e)
		}
		fmt.Printf("%s: %d error(s), %d warning(s)\n", dir, len(errs), len(warns))
		failed = failed || len(errs) > 0
	}
	if failed {
		os.Exit(1)
	}
}

// validate returns one line per error and per warning found in the bundle at dir.
func validate(dir string, optional map[string]string) (errs, warns []string) {
	// The loader's own word for a missing directory is "invalid file: <nil>".
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return []string{fmt.Sprintf("cannot load the bundle: %s is not a directory", dir)}, nil
	}
	// The loader keeps only the first document of each manifest file, as OLM's own bundle
	// loaders do (one object per file): a second object would be dropped without a word.
	errs = append(errs, multiDocumentFiles(filepath.Join(dir, "manifests"))...)
	// The loader reads metadata/annotations.yaml only for channels and is silent when it is
	// missing, but without a package name the bundle cannot be put in a catalog.
	errs = append(errs, checkAnnotations(dir)...)

	bundle, err := manifests.GetBundleFromDir(dir)
	if err != nil || bundle == nil || bundle.CSV == nil {
		return append(errs, fmt.Sprintf("cannot load the bundle: %v", err)), warns
	}
	// Validators take their options as one more object among those they validate.
	objs := append(bundle.ObjectsToValidate(), optional)
	for _, r := range validators.Validate(objs...) {
		errs = append(errs, describe(r.Name, r.Errors)...)
		warns = append(warns, describe(r.Name, r.Warnings)...)
	}
	// Some checks run in more than one validator (the CSV's and OperatorHub's both warn
	// about a missing minKubeVersion): one line each is enough.
	return unique(errs), unique(warns)
}

func unique(lines []string) (out []string) {
	seen := map[string]bool{}
	for _, l := range lines {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

func describe(name string, es []verrors.Error) (lines []string) {
	for _, e := range es {
		// Error() adds the level, which the caller prints in its own words, and the bad
		// value, which the detail already names or, for a pointer, is printed as an address.
		msg := e.Detail
		if msg == "" {
			msg = strings.TrimPrefix(e.Error(), string(e.Level)+": ")
		} else if e.Field != "" && !strings.HasPrefix(msg, e.Field) {
			msg = e.Field + ": " + msg
		}
		// A bad value that prints as text (a kind, a name) tells apart findings that share
		// a detail, such as a missing example for each of several kinds.
		bad := ""
		switch v := e.BadValue.(type) {
		case string:
			bad = v
		case fmt.Stringer:
			bad = v.String()
		}
		if bad != "" && !strings.Contains(msg, bad) {
			msg = bad + ": " + msg
		}
		if name != "" {
			msg = name + ": " + msg
		}
		lines = append(lines, msg)
	}
	return lines
}

// multiDocumentFiles names each manifest file that holds more than one object.
func multiDocumentFiles(manifestsDir string) (errs []string) {
	files, _ := filepath.Glob(filepath.Join(manifestsDir, "*"))
	for _, path := range files {
		if st, err := os.Stat(path); err != nil || st.IsDir() {
			continue // the loader reports directories here and files it cannot read
		}
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		docs := 0
		d := yaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			var obj map[string]any
			if err := d.Decode(&obj); err != nil {
				if !errors.Is(err, io.EOF) {
					errs = append(errs, fmt.Sprintf("%s: %v", path, err))
				}
				break
			}
			if len(obj) > 0 {
				docs++
			}
		}
		f.Close()
		if docs > 1 {
			errs = append(errs, fmt.Sprintf("%s holds %d objects: bundle loaders read only the first: put each in its own file", path, docs))
		}
	}
	return errs
}

// checkAnnotations requires metadata/annotations.yaml and the package name in it.
func checkAnnotations(dir string) []string {
	path := filepath.Join(dir, "metadata", "annotations.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return []string{err.Error()}
	}
	var a manifests.AnnotationsFile
	if err := sigsyaml.Unmarshal(data, &a); err != nil {
		return []string{fmt.Sprintf("%s: %v", path, err)}
	}
	if a.Annotations.PackageName == "" {
		return []string{fmt.Sprintf("%s: no operators.operatorframework.io.bundle.package.v1 annotation", path)}
	}
	return nil
}
