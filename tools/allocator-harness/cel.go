// Copyright (c) 2026 Flant JSC
// SPDX-License-Identifier: Apache-2.0

package main

// CEL mode: the API server's check of one DeviceClass or claim selector, so the Rust
// compile-time checker and cost estimator of dra-cel can be compared with the real compiler.
//
//	request: {"celCompile":"<expression>"}
//	answer:  {"maxCost":N} | {"maxCost":N,"error":"too complex, exceeds cost limit"} | {"error":"..."}
//
// The expression is compiled as the API server validates a new selector
// (k8s.io/kubernetes pkg/apis/resource/validation, validateCELSelector): the
// NewExpressions environment with this release's test-bed features, the length limit
// first, then compile errors, then MaxCost > CELSelectorExpressionMaxCost.
//
//	request: {"celDeclarations":true}
//	answer:  {"functions":[{"name","overload","member","args","result","params"}]}
//
// lists the function overloads that environment declares (in declaration order within a
// function), so the Rust declaration table can be compared with it.

import (
	"fmt"
	"sort"
	"strings"

	"github.com/google/cel-go/common/types"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/dynamic-resource-allocation/cel"
)

// requestLine is one input line: an allocator case, a benchmark request or a CEL request.
type requestLine struct {
	request
	CelCompile      *string `json:"celCompile,omitempty"`
	CelDeclarations bool    `json:"celDeclarations,omitempty"`
}

type celAnswer struct {
	Error   string  `json:"error,omitempty"`
	MaxCost *uint64 `json:"maxCost,omitempty"`
}

func newExpressionsResult(expression string) cel.CompilationResult {
	envType := environment.NewExpressions
	return cel.GetCompiler(celFeatures).CompileCELExpression(expression, cel.Options{EnvType: &envType})
}

func celCompile(expression string) (answer celAnswer) {
	// A panic in the compiler fails the API server's request too: report it as a rejection.
	defer func() {
		if r := recover(); r != nil {
			answer = celAnswer{Error: fmt.Sprintf("panic: %v", r)}
		}
	}()
	if len(expression) > resourceapi.CELSelectorExpressionMaxLength {
		return celAnswer{Error: fmt.Sprintf("may not be more than %d bytes", resourceapi.CELSelectorExpressionMaxLength)}
	}
	result := newExpressionsResult(expression)
	if result.Error != nil {
		return celAnswer{Error: result.Error.Detail}
	}
	cost := result.MaxCost
	answer = celAnswer{MaxCost: &cost}
	if cost > resourceapi.CELSelectorExpressionMaxCost {
		answer.Error = "too complex, exceeds cost limit"
	}
	return answer
}

type celOverload struct {
	Name     string   `json:"name"`
	Overload string   `json:"overload"`
	Member   bool     `json:"member"`
	Args     []string `json:"args"`
	Result   string   `json:"result"`
	Params   []string `json:"params"`
}

type celDeclarationsAnswer struct {
	Error     string        `json:"error,omitempty"`
	Functions []celOverload `json:"functions"`
}

// celTypeName spells a type with its kind where the kind is not evident from the name:
// "~A" a type parameter, "struct:N" an object type, "opaque:N(P...)" an opaque type,
// "wrapper(T)" a nullable primitive.
func celTypeName(t *types.Type) string {
	params := make([]string, 0, len(t.Parameters()))
	for _, p := range t.Parameters() {
		params = append(params, celTypeName(p))
	}
	withParams := func(name string) string {
		if len(params) == 0 {
			return name
		}
		return name + "(" + strings.Join(params, ", ") + ")"
	}
	switch t.Kind() {
	case types.TypeParamKind:
		return "~" + t.TypeName()
	case types.StructKind:
		return "struct:" + t.TypeName()
	case types.OpaqueKind:
		return withParams("opaque:" + t.TypeName())
	case types.AnyKind:
		return "any"
	case types.DynKind:
		return "dyn"
	case types.ErrorKind:
		return "error"
	case types.NullTypeKind:
		return "null_type"
	case types.ListKind:
		return withParams("list")
	case types.MapKind:
		return withParams("map")
	case types.TypeKind:
		return withParams("type")
	}
	if t.IsAssignableType(types.NullType) {
		return "wrapper(" + t.TypeName() + ")"
	}
	return t.TypeName()
}

func celDeclarations() celDeclarationsAnswer {
	result := newExpressionsResult("true")
	if result.Error != nil {
		return celDeclarationsAnswer{Error: result.Error.Detail}
	}
	env := result.Environment
	var answer celDeclarationsAnswer
	for name, fn := range env.Functions() {
		if fn.IsDeclarationDisabled() {
			continue
		}
		for _, o := range fn.OverloadDecls() {
			args := make([]string, 0, len(o.ArgTypes()))
			for _, a := range o.ArgTypes() {
				args = append(args, celTypeName(a))
			}
			params := append([]string{}, o.TypeParams()...)
			sort.Strings(params)
			answer.Functions = append(answer.Functions, celOverload{
				Name: name, Overload: o.ID(), Member: o.IsMemberFunction(),
				Args: args, Result: celTypeName(o.ResultType()), Params: params,
			})
		}
	}
	// Overloads keep their declaration order: the checker tries them in that order.
	sort.SliceStable(answer.Functions, func(i, j int) bool {
		return answer.Functions[i].Name < answer.Functions[j].Name
	})
	return answer
}
